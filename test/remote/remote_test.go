package remote_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// topicReq is a test topic with 3 partitions.
func topicReq(name string) client.CreateTopicRequest {
	return client.CreateTopicRequest{Name: name, Partitions: 3}
}

var _ = Describe("Remote children into another cluster", Ordered, ContinueOnFailure, func() {
	var p *pair
	failed := false

	BeforeAll(func() {
		p = startPair(func() bool { return failed })
		_, err := p.dst.Client(0).CreateUser(ctx(15*time.Second), client.CreateUserRequest{Username: linkUser,
			Password: linkPassword, Grants: []client.Grant{{Action: client.ActionProduce, Patterns: []string{targetTopicPattern}}}})
		Expect(err).NotTo(HaveOccurred(), "create the link user on the target")
	})
	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			failed = true
		}
	})
	AfterAll(func() {
		// The link password is stored in the source's metadata and must never reach a log line
		// of either cluster; neither may the wrong or the changed one.
		for name, c := range map[string]*harness.Cluster{"source": p.src, "target": p.dst} {
			for i := range c.Size() {
				b, err := os.ReadFile(c.Node(i).LogPath)
				Expect(err).NotTo(HaveOccurred())
				for _, pw := range []string{linkPassword, wrongPassword, changedPassword} {
					Expect(strings.Contains(string(b), pw)).To(BeFalse(), "%s node %s logged a password", name, c.ID(i))
				}
			}
		}
		// The source stores the link password sealed (docs/fanout.md "Remote children"): no
		// file of a source node's data directory (Raft log, metadata store, snapshots) holds it.
		for i := range p.src.Size() {
			Expect(filepath.WalkDir(p.src.Node(i).DataDir, func(path string, d fs.DirEntry, err error) error {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(path)
				if errors.Is(err, fs.ErrNotExist) {
					return nil // a live node removed it (compaction) meanwhile
				} else if err != nil {
					return err
				}
				for _, pw := range []string{linkPassword, wrongPassword} {
					Expect(bytes.Contains(b, []byte(pw))).To(BeFalse(), "source node %s stores a link password in clear in %s", p.src.ID(i), path)
				}
				return nil
			})).To(Succeed())
		}
	})

	It("refuses an attach whose target check fails with 422 and its reason, and leaves no link behind", func() {
		parent, target := "wc", "rc-wc"
		createTopic(p.src, 0, topicReq(parent))
		createTopic(p.dst, 0, topicReq(target))

		host := p.dst.Node(0).Host
		port, err := harness.FreePort(host)
		Expect(err).NotTo(HaveOccurred())
		nobody := client.RemoteChild{URL: "http://" + net.JoinHostPort(host, fmt.Sprint(port)), Topic: target,
			User: linkUser, Password: linkPassword}
		for _, tc := range []struct {
			what   string
			remote client.RemoteChild
			reason string
		}{
			{"wrong password", p.remote(target, wrongPassword), "unauthorized"},
			{"target topic missing", p.remote("rc-none", linkPassword), "target_topic_missing"},
			{"nothing listens at the url", nobody, "target_unreachable"},
		} {
			status, body := p.attachRaw(1, parent, tc.remote, "attach")
			logf("attach with %s: %d %v", tc.what, status, body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "attach with %s: %v", tc.what, body)
			Expect(body["reason"]).To(Equal(tc.reason), "attach with %s: %v", tc.what, body)
			Expect(fmt.Sprint(body)).NotTo(ContainSubstring(tc.remote.Password), "the answer echoes no password")
		}
		raw, l, err := p.listing(parent)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Children).To(BeEmpty(), "no link is left behind by a failed check: %s", raw)
	})

	It("copies every parent record at least once, in key order, through a kill -9 of a source owner, a 30 s frozen target, a deleted target topic and a changed password", func() {
		parent, target := "orders", "rc-orders"
		owners := createTopic(p.src, 0, topicReq(parent))
		createTopic(p.dst, 1, topicReq(target))
		logf("parent %s owners %v", parent, owners)

		l := p.attach(1, parent, p.remote(target, linkPassword), "")
		Expect(l.Kind).To(Equal("remote"))
		Expect(l.ID).To(Equal("remote:" + target + "@" + p.dst.Node(0).HTTPAddr))
		Expect(l.Name).To(Equal("remote:" + p.dst.URL(0) + "/" + target))
		Expect(l.Start).To(Equal("attach"))
		id := l.ID
		raw, _, err := p.listing(parent)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(linkPassword), "the listing never carries the password")
		Expect(string(raw)).To(ContainSubstring(id))

		var wrongStates []string // listing samples that contradicted the phase (checked at the end)

		// Nothing was produced before the attach: every parent record is after its attach point.
		h := harness.NewHistory()
		pr := newProducers(h, target)
		eps := p.src.Endpoints()
		pr.start(eps, parent, "a", 3, 2, 10*time.Millisecond)
		defer pr.halt()
		waitAccepted(h, target, 200, 20*time.Second)
		p.waitLink(parent, id, "copying", 20*time.Second, func(l *client.ChildLink) bool {
			return l.State == "active" && harness.Sum(values(recoveryPoint(l))) > 0
		})

		By("kill -9 of the owner of a parent partition mid-stream, then its restart on the same data")
		leaderIdx, err := p.src.LeaderIndex(ctx(30 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		victim, vp := -1, -1
		for part, o := range owners {
			if i := p.src.Index(o); i >= 0 && i != leaderIdx {
				victim, vp = i, part
				break
			}
		}
		if victim < 0 { // every parent partition on the leader: kill it anyway
			victim, vp = leaderIdx, 0
		}
		before := recoveryPoint(p.waitLink(parent, id, "listed", 10*time.Second, func(*client.ChildLink) bool { return true }))
		p.src.Kill(victim)
		killedAt := time.Now()
		accepted := len(h.Accepted(target))
		logf("killed %s (owner of parent partition %d, recovery point %d there) with %d accepted", p.src.ID(victim), vp, before[vp], accepted)
		Eventually(func() bool {
			return len(h.Accepted(target)) >= accepted+150 && time.Since(killedAt) >= 4*time.Second
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "producers keep getting 202 from the live nodes")
		Expect(p.src.Restart(ctx(60*time.Second), victim)).To(Succeed())
		Expect(p.src.WaitMember(ctx(60*time.Second), p.src.ID(victim), client.StatusAlive)).To(Succeed())
		l = p.waitLink(parent, id, "active on every partition after the restart", 45*time.Second, func(l *client.ChildLink) bool {
			return l.State == "active" && l.LagComplete && recoveryPoint(l)[vp] > before[vp]
		})
		logf("after the restart partition %d resumed at %d (was %d before the kill)", vp, recoveryPoint(l)[vp], before[vp])

		By("the whole target frozen (SIGSTOP) for 30 s")
		waitAccepted(h, target, len(h.Accepted(target))+100, 20*time.Second)
		for i := range p.dst.Size() {
			p.dst.Pause(i)
		}
		frozenAt := time.Now()
		l = p.waitLink(parent, id, "target_unreachable", 25*time.Second, inState("target_unreachable"))
		Expect(l.LastError).NotTo(BeEmpty(), "an unreachable link says why")
		Expect(l.LastError).NotTo(ContainSubstring(linkPassword))
		frozenRP := recoveryPoint(l)
		Expect(frozenRP).To(HaveLen(3), "the recovery point names every parent partition")
		for _, c := range l.Cursors {
			Expect(frozenRP[c.ParentPartition]).To(BeNumerically("<=", c.HighWatermark))
		}
		// The target stays frozen for 30 s; the listing must say so the whole time.
		wrongStates = append(wrongStates, p.holdState(parent, id, "target_unreachable", frozenAt.Add(30*time.Second))...)
		l = p.waitLink(parent, id, "still listed", 10*time.Second, func(*client.ChildLink) bool { return true })
		Expect(l.State).To(Equal("target_unreachable"), "still unreachable at the end of the freeze")
		Expect(recoveryPoint(l)).To(Equal(frozenRP), "nothing advances while no target node can answer 202")
		Expect(l.LagMessages).To(BeNumerically(">", 0), "the parent kept growing")
		for i := range p.dst.Size() {
			p.dst.Resume(i)
		}
		p.waitLink(parent, id, "active again after SIGCONT", 60*time.Second, func(l *client.ChildLink) bool {
			rp := recoveryPoint(l)
			return l.State == "active" && slices.ContainsFunc(l.Cursors, func(c client.ChildCursor) bool {
				return rp[c.ParentPartition] > frozenRP[c.ParentPartition]
			})
		})

		By("the target topic deleted, then created again")
		// Quiesce first: what the first incarnation holds is read before it is deleted (a
		// deleted topic takes its records with it; the link does not send them again).
		pr.halt()
		parentA := readUntil(p.src.Client(0), parent, h.Accepted(target), 30*time.Second)
		p.waitLink(parent, id, "caught up before the delete", 90*time.Second, caughtUp)
		gen1 := readUntil(p.dst.Client(0), target, payloads(parentA), 30*time.Second)
		recordTarget(h, target+"#1", gen1)
		logf("first incarnation of %s holds %d records", target, len(gen1))
		deleteTopic(p.dst, 0, target)
		pr.start(eps, parent, "b", 3, 2, 10*time.Millisecond)
		l = p.waitLink(parent, id, "target_topic_missing", 30*time.Second, inState("target_topic_missing"))
		Expect(l.LastError).NotTo(BeEmpty())
		missingRP := recoveryPoint(l)
		wrongStates = append(wrongStates, p.holdState(parent, id, "target_topic_missing", time.Now().Add(3*time.Second))...)
		waitAccepted(h, target, len(h.Accepted(target))+100, 20*time.Second)
		l = p.waitLink(parent, id, "listed", 10*time.Second, func(*client.ChildLink) bool { return true })
		Expect(l.State).To(Equal("target_topic_missing"), "the state holds while the topic is missing")
		Expect(recoveryPoint(l)).To(Equal(missingRP), "nothing advances while the target topic is missing")
		createTopic(p.dst, 1, topicReq(target))
		p.waitLink(parent, id, "active after the topic is back", 60*time.Second, inState("active"))
		Eventually(func() int64 {
			hw, err := harness.HighWatermarks(ctx(5*time.Second), p.dst.Client(0), target)
			if err != nil {
				return 0
			}
			return harness.Sum(hw)
		}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(BeNumerically(">", 0),
			"records arrive in the recreated topic")

		By("the link user's password changed on the target, then restored")
		Expect(p.dst.Client(0).SetPassword(ctx(15*time.Second), linkUser, changedPassword, "")).To(Succeed())
		l = p.waitLink(parent, id, "unauthorized", 30*time.Second, inState("unauthorized"))
		Expect(l.LastError).NotTo(BeEmpty())
		Expect(l.LastError).NotTo(ContainSubstring(linkPassword))
		wrongStates = append(wrongStates, p.holdState(parent, id, "unauthorized", time.Now().Add(4*time.Second))...)
		Expect(p.dst.Client(0).SetPassword(ctx(15*time.Second), linkUser, linkPassword, "")).To(Succeed())
		p.waitLink(parent, id, "active with the password restored", 60*time.Second, inState("active"))
		waitAccepted(h, target, len(h.Accepted(target))+100, 20*time.Second)

		By("the final check: both topics read in full")
		pr.halt()
		readUntil(p.src.Client(0), parent, h.Accepted(target), 30*time.Second)
		parentRecs := readAll(p.src.Client(0), parent)
		p.waitLink(parent, id, "caught up at the end", 90*time.Second, caughtUp)
		gen2 := readUntil(p.dst.Client(1), target, payloads(flatten(parentRecs), gen1), 30*time.Second)
		recordTarget(h, target+"#2", gen2)
		r := h.Check()
		logf("history: %s", r)
		AddReportEntry("remote link history", r.String())
		Expect(r.Accepted).To(BeNumerically(">", 1000), "the scenario produced enough")
		Expect(r.OK()).To(BeTrue(), "every parent 202 reached the target at least once, nothing phantom: %s", r)

		onTarget := map[string]string{} // payload → key as the target stores it
		for _, rec := range append(slices.Clone(gen1), gen2...) {
			if k, seen := onTarget[rec.payload]; seen {
				Expect(rec.key).To(Equal(k), "every copy of %s has one key", rec.payload)
			}
			onTarget[rec.payload] = rec.key
		}
		inParent := 0
		for _, recs := range parentRecs {
			for _, rec := range recs {
				inParent++
				k, ok := onTarget[rec.payload]
				Expect(ok).To(BeTrue(), "parent record %s (%d@%d) reached the target", rec.payload, rec.partition, rec.offset)
				Expect(k).To(Equal(rec.key), "the key of %s arrives unchanged", rec.payload)
				sent, ours := pr.key(rec.payload)
				Expect(ours).To(BeTrue(), "parent record %s was produced by this spec", rec.payload)
				Expect(rec.key).To(Equal(sent))
			}
		}
		ko := expectKeyOrder(parentRecs, gen1, gen2)
		msg := fmt.Sprintf("%d parent records (every one on the target), %d target copies over two incarnations "+
			"(first: %d copies of %d records, second: %d of %d); "+
			"%d keys, %d key/parent-partition sequences whose first copies keep the parent order in every target partition; "+
			"%d keys spread over several parent partitions (dead-owner reroute), %d over several target partitions; "+
			"%d extra parent copies re-committed after the kill -9 (%d records in several parent partitions, not order-checked)",
			inParent, len(gen1)+len(gen2), len(gen1), len(payloads(gen1)), len(gen2), len(payloads(gen2)), ko.keys, ko.sequences, ko.splitParent, ko.splitTarget,
			ko.parentCopies, ko.ambiguous)
		logf("%s", msg)
		AddReportEntry("remote link copies", msg)
		Expect(wrongStates).To(BeEmpty(), "the listing showed the phase's state throughout")
	})

	It("starts at the oldest retained record, at the consumer frontier or at the attach point as asked", func() {
		parent := "sm"
		createTopic(p.src, 0, topicReq(parent))
		const early = 10
		for part := range 3 {
			for i := range early {
				pin := part
				Expect(p.src.Client(i%3).Produce(ctx(10*time.Second), parent, []byte(fmt.Sprintf("sm-p%d-%02d", part, i)),
					client.ProduceOptions{Partition: &pin})).To(Succeed())
			}
		}
		Eventually(func() []int64 {
			hw, _ := harness.HighWatermarks(ctx(5*time.Second), p.src.Client(0), parent)
			return hw
		}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal([]int64{early, early, early}))
		// Consumers resolve partition 0 up to offset 4 and all of partition 1; partition 2 is
		// untouched. The consumer frontier is then 4, 10, 0. Which records sit below it is read
		// from the deliveries: a 202 means the record is in the ingress WAL of the node that
		// took it, and each node's dispatcher commits it to the owner on its own, so records
		// produced one after another through different nodes may reach the log in another order
		// (docs/internals/produce-path.md §4).
		resolved := map[string]bool{}
		for part, n := range map[int]int{0: 4, 1: early} {
			pin := part
			msgs, err := p.src.Client(0).Consume(ctx(10*time.Second), parent, client.ConsumeOptions{Partition: &pin, Max: n, Wait: time.Second})
			Expect(err).NotTo(HaveOccurred())
			Expect(msgs).To(HaveLen(n))
			ds, err := harness.ToDeliveries(msgs)
			Expect(err).NotTo(HaveOccurred())
			for i, d := range ds {
				Expect(d.Offset).To(BeNumerically("==", i), "pinned consume of %s/%d hands out offsets in order", parent, part)
				resolved[d.Payload] = true
			}
			Expect(harness.AckAll(ctx(10*time.Second), p.src.Client(0), parent, ds, time.Now().Add(10*time.Second))).To(Succeed())
		}
		Expect(resolved).To(HaveLen(4+early), "every delivery below the frontier is a distinct record")

		ownersAtAttach, _, err := harness.TopicOwners(ctx(10*time.Second), p.src.Client(0), parent)
		Expect(err).NotTo(HaveOccurred())
		modes := []string{"oldest", "consumer_frontier", "attach"}
		ids := map[string]string{}
		for _, m := range modes {
			target := "rc-sm-" + strings.ReplaceAll(m, "_", "-")
			createTopic(p.dst, 0, topicReq(target))
			l := p.attach(m2i(m), parent, p.remote(target, linkPassword), m)
			Expect(l.Start).To(Equal(m))
			ids[m] = l.ID
		}
		const late = 2
		for part := range 3 {
			for i := range late {
				pin := part
				Expect(p.src.Client(1).Produce(ctx(10*time.Second), parent, []byte(fmt.Sprintf("sm-late-p%d-%d", part, i)),
					client.ProduceOptions{Partition: &pin})).To(Succeed())
			}
		}

		want := map[string][]string{}
		for part := range 3 {
			for i := range early {
				id := fmt.Sprintf("sm-p%d-%02d", part, i)
				want["oldest"] = append(want["oldest"], id)
				if !resolved[id] {
					want["consumer_frontier"] = append(want["consumer_frontier"], id)
				}
			}
			for i := range late {
				id := fmt.Sprintf("sm-late-p%d-%d", part, i)
				for _, m := range modes {
					want[m] = append(want[m], id)
				}
			}
		}
		for _, m := range modes {
			target := "rc-sm-" + strings.ReplaceAll(m, "_", "-")
			p.waitLink(parent, ids[m], "caught up", 30*time.Second, caughtUp)
			got := payloads(readUntil(p.dst.Client(1), target, toSet(want[m]), 30*time.Second))
			if missing, extra := setDiff(toSet(want[m]), got); len(missing)+len(extra) > 0 {
				owners, _, _ := harness.TopicOwners(ctx(10*time.Second), p.src.Client(0), parent)
				l, _ := p.link(parent, ids[m])
				Fail(fmt.Sprintf("start=%s: %s holds %d records, missing %v, unexpected %v; owners of %s at attach %v, now %v; link %+v",
					m, target, len(got), missing, extra, parent, ownersAtAttach, owners, l))
			}
			logf("start=%s: %d records on %s as expected", m, len(got), target)
		}

		// Detach by id and by the listed name; both links leave the listing.
		_, l, err := p.listing(parent)
		Expect(err).NotTo(HaveOccurred())
		name := ""
		for _, c := range l.Children {
			if c.ID == ids["oldest"] {
				name = c.Name
			}
		}
		Expect(name).To(HavePrefix("remote:http://"))
		Expect(p.src.Client(2).Detach(ctx(15*time.Second), parent, ids["attach"])).To(Succeed())
		Expect(p.src.Client(2).Detach(ctx(15*time.Second), parent, name)).To(Succeed())
		_, l, err = p.listing(parent)
		Expect(err).NotTo(HaveOccurred())
		var left []string
		for _, c := range l.Children {
			left = append(left, c.ID)
		}
		Expect(left).To(Equal([]string{ids["consumer_frontier"]}))
	})
})
