package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Fan-out specs (docs/internals/fanout.md, docs/internals/http-api.md §2.12–§2.14): a parent's committed records are copied
// into its children by cursors on the parent partitions' owners. Each child gets its own
// History in which every produce to the parent is recorded as a produce to that child, so the
// history check proves "every 202 after the attach point is in the child at least once, nothing
// phantom" per child.

// fanRec is one history a produce to a parent is recorded in, under the topic name the
// history's check runs for (the parent itself, or a child).
type fanRec struct {
	h     *harness.History
	topic string
}

// record notes one produce attempt of id through node in every history of recs.
func record(recs []fanRec, node, id string, err error) harness.Outcome {
	var o harness.Outcome
	for _, r := range recs {
		o = r.h.Produce(r.topic, node, id, err)
	}
	return o
}

// produceFan sends n payloads "<prefix>-<seq>" to parent one by one, round robin over eps,
// gap apart, and records each in every history of recs; it returns how many got a 202 and when
// each call began.
func produceFan(recs []fanRec, eps []harness.Endpoint, parent, prefix string, n int, gap time.Duration) (int, map[string]time.Time) {
	ok := 0
	began := make(map[string]time.Time, n)
	for seq := range n {
		if seq > 0 && gap > 0 {
			<-time.After(gap) // scenario timing: spread the records' commit times
		}
		ep := eps[seq%len(eps)]
		id := fmt.Sprintf("%s-%06d", prefix, seq)
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		began[id] = time.Now()
		err := ep.Client.Produce(rctx, parent, []byte(id), client.ProduceOptions{})
		cancel()
		if record(recs, ep.Node, id, err) == harness.OutcomeAccepted {
			ok++
		} else {
			logf("produce %s via %s: %v", id, ep.Node, err)
		}
	}
	return ok, began
}

// startFanProducers runs workers producing "<prefix>-w<worker>-<seq>" to parent until ctx
// ends, worker w's message seq going to eps[(w+seq) % len], recording every attempt in recs.
// A failed send moves on to a fresh payload after 100 ms. It returns a function that waits
// for the workers.
func startFanProducers(ctx context.Context, recs []fanRec, eps []harness.Endpoint, parent, prefix string, workers int, interval time.Duration) func() {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				ep := eps[(w+seq)%len(eps)]
				id := fmt.Sprintf("%s-w%02d-%06d", prefix, w, seq)
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := ep.Client.Produce(rctx, parent, []byte(id), client.ProduceOptions{})
				cancel()
				record(recs, ep.Node, id, err)
				pause := interval
				if err != nil {
					pause = max(pause, 100*time.Millisecond)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(pause):
				}
			}
		}()
	}
	return wg.Wait
}

// committedTotal waits until the committed high watermarks of topic, described through node
// i, sum to at least n, and returns them.
func committedTotal(c *harness.Cluster, i int, topic string, n int64) []int64 {
	GinkgoHelper()
	var hw []int64
	Eventually(func(g Gomega) int64 {
		var err error
		hw, err = harness.HighWatermarks(ctx(5*time.Second), c.Client(i), topic)
		g.Expect(err).NotTo(HaveOccurred())
		var sum int64
		for _, x := range hw {
			sum += x
		}
		return sum
	}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", n),
		"%d records of %s committed at the owners", n, topic)
	return hw
}

// createChild creates child with parent through node i (retrying 503s) and waits until every
// live node has it assigned; it returns the child's partition owners.
func createChild(c *harness.Cluster, i int, parent, child string, delayMs int64) []string {
	GinkgoHelper()
	req := topicReq(child)
	req.Parent, req.FanoutDelayMs = parent, delayMs
	_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(i), req)
	Expect(err).NotTo(HaveOccurred(), "create %s with parent %s through %s", child, parent, c.ID(i))
	owners := waitTopicEverywhere(c, child)
	logf("child %s of %s: partition owners %v", child, parent, owners)
	return owners
}

// attach attaches child to parent through node i, retrying 503s (an owner not askable yet).
func attach(c *harness.Cluster, i int, parent, child string, delayMs int64) {
	GinkgoHelper()
	Eventually(func() error {
		_, err := c.Client(i).Attach(ctx(10*time.Second), parent, child, delayMs)
		if err != nil && !client.IsStatus(err, http.StatusServiceUnavailable) {
			return StopTrying(fmt.Sprintf("attach %s to %s through %s", child, parent, c.ID(i))).Wrap(err)
		}
		return err
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// waitLinkEverywhere waits until every live node describes child with the given parent ("" =
// detached) and returns the child as the last node saw it.
func waitLinkEverywhere(c *harness.Cluster, child, parent string) *client.TopicDetail {
	GinkgoHelper()
	var d *client.TopicDetail
	for _, j := range c.Live() {
		Eventually(func(g Gomega) string {
			var err error
			d, err = c.Client(j).GetTopic(ctx(5*time.Second), child, nil)
			g.Expect(err).NotTo(HaveOccurred())
			return d.Parent
		}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(Equal(parent),
			"%s sees the link of %s", c.ID(j), child)
	}
	return d
}

// logChildren logs the children listing of parent through node i (state, lag, cursors).
func logChildren(c *harness.Cluster, i int, parent string) {
	GinkgoHelper()
	l, err := c.Client(i).Children(ctx(10*time.Second), parent)
	Expect(err).NotTo(HaveOccurred())
	for _, ch := range l.Children {
		logf("child %s of %s: state %s, lag %d (complete %v), delay %d ms, epoch %s, cursors %+v",
			ch.Name, parent, ch.State, ch.LagMessages, ch.LagComplete, ch.DelayMs, ch.AttachEpoch, ch.Cursors)
	}
}

// reportDuplicates adds the duplicate counts of a child's history check to the spec report.
func reportDuplicates(child string, r harness.Report) {
	ids := slices.Sorted(maps.Keys(r.DuplicateIDs))
	msg := fmt.Sprintf("%d duplicate deliveries over %d ids %v, %d extra stored copies (fan-out re-copies)",
		r.Duplicates, len(ids), ids[:min(5, len(ids))], r.DuplicateCopies)
	logf("%s: %s", child, msg)
	AddReportEntry(child+" duplicates", msg)
}

var _ = Describe("Fan-out across nodes", func() {
	It("copies every parent record into children placed on other nodes, through a kill -9 of a parent partition owner mid-stream", func() {
		c := newCluster(3)
		parent, childA, childB := "fan-parent", "fan-child-a", "fan-child-b"
		pOwners := createTopic(c, 0, parent)
		aOwners := createChild(c, 1, parent, childA, 0)
		for p := range pOwners {
			Expect(aOwners[p]).NotTo(Equal(pOwners[p]), "child partition %d is placed away from the parent partition's owner", p)
		}
		bOwners := createTopic(c, 2, childB)
		attach(c, 1, parent, childB, 0)
		waitLinkEverywhere(c, childA, parent)
		waitLinkEverywhere(c, childB, parent)
		logf("parent owners %v, child A owners %v, child B owners %v", pOwners, aOwners, bOwners)

		// Nothing was produced before the attaches: every record below is after both attach points.
		hp, ha, hb := harness.NewHistory(), harness.NewHistory(), harness.NewHistory()
		recs := []fanRec{{hp, parent}, {ha, childA}, {hb, childB}}
		victim, vp := ownerNotLeader(c, pOwners, leader(c))
		logf("victim %s owns parent partition %d", c.ID(victim), vp)
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pwait := startFanProducers(tctx, recs, c.Endpoints(), parent, "f", 3, 20*time.Millisecond)
		// Child consumers run on the nodes that stay up, during the whole scenario.
		cstA, cwaitA := harness.StartClusterConsumers(tctx, ha, harness.ConsumerOptions{Topic: childA, Workers: 1, Endpoints: c.Endpoints(c.Others(victim)...)})
		cstB, cwaitB := harness.StartClusterConsumers(tctx, hb, harness.ConsumerOptions{Topic: childB, Workers: 1, Endpoints: c.Endpoints(c.Others(victim)...)})
		watch(ha, childA, &harness.TrafficStats{}, cstA)
		watch(hb, childB, &harness.TrafficStats{}, cstB)
		waitAccepted(hp, parent, 150, 20*time.Second)

		c.Kill(victim)
		killedAt := time.Now()
		before := len(hp.Accepted(parent))
		logf("killed %s with %d accepted", c.ID(victim), before)
		// Traffic goes on through the other nodes while the victim (a cursor host and a child
		// partition owner) is down.
		Eventually(func() bool {
			return len(hp.Accepted(parent)) >= before+150 && time.Since(killedAt) >= 4*time.Second
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "producers on live nodes keep getting 202")
		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		healthy(c, victim)
		restarted := len(hp.Accepted(parent))
		logf("restarted %s with %d accepted", c.ID(victim), restarted)
		waitAccepted(hp, parent, restarted+150, 30*time.Second)
		stop()
		pwait()
		cwaitA()
		cwaitB()

		total := int64(len(hp.Accepted(parent)))
		committedTotal(c, 0, parent, total)
		logChildren(c, 0, parent)
		drain(ha, childA, c.Endpoints())
		drain(hb, childB, c.Endpoints())
		logChildren(c, 0, parent)
		ra := expectClean("child A ("+childA+", created with parent)", ha)
		rb := expectClean("child B ("+childB+", attached later)", hb)
		Expect(ra.Accepted).To(BeNumerically("==", total))
		Expect(rb.Accepted).To(BeNumerically("==", total))
		reportDuplicates(childA, ra)
		reportDuplicates(childB, rb)
	})

	It("a delay child never delivers early across nodes", func() {
		const delay = 3 * time.Second
		c := newCluster(3)
		parent, child := "delay-parent", "delay-child"
		req := topicReq(parent)
		keep := int64(0) // keep forever: a delay child's parent needs 0 or >= delay + 1 h
		req.RetentionMs = &keep
		_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), req)
		Expect(err).NotTo(HaveOccurred())
		waitTopicEverywhere(c, parent)
		createChild(c, 1, parent, child, delay.Milliseconds())
		waitLinkEverywhere(c, child, parent)

		// The child is consumed through node 2 only; the records enter through nodes 0 and 1.
		consumer := 2
		hc := harness.NewHistory()
		var mu sync.Mutex
		firstSeen := map[string]time.Time{}
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			cl := c.Client(consumer)
			for tctx.Err() == nil {
				rctx, cancel := context.WithTimeout(tctx, 6*time.Second)
				msgs, err := cl.Consume(rctx, child, client.ConsumeOptions{Wait: time.Second, Max: 50})
				at := time.Now()
				cancel()
				if err != nil {
					if tctx.Err() == nil {
						logf("consume %s via %s: %v", child, c.ID(consumer), err)
						<-time.After(100 * time.Millisecond) // back off after a failed call
					}
					continue
				}
				ds, err := harness.ToDeliveries(msgs)
				Expect(err).NotTo(HaveOccurred())
				hc.Deliver(child, c.ID(consumer), ds, false)
				mu.Lock()
				for _, d := range ds {
					if _, ok := firstSeen[d.Payload]; !ok {
						firstSeen[d.Payload] = at
					}
				}
				mu.Unlock()
				if len(ds) > 0 {
					_ = harness.AckAll(tctx, cl, child, ds, time.Now().Add(5*time.Second))
				}
			}
		}()

		// Records 200 ms apart span most of the delay: each must wait for its own due time, not
		// be released with an earlier one.
		const n = 12
		sent, began := produceFan([]fanRec{{hc, child}}, c.Endpoints(0, 1), parent, "d", n, 200*time.Millisecond)
		Expect(sent).To(Equal(n))
		producedAt := time.Now()
		Eventually(func() int { return len(hc.Missing(child)) }).WithTimeout(delay+20*time.Second).WithPolling(50*time.Millisecond).
			Should(BeZero(), "every record reaches the delay child within delay + 20 s")
		deliveredAt := time.Now()
		stop()
		<-done

		// The gate releases a record at committed_at + delay on the parent owner's clock (the
		// same host clock here); committed_at is after the produce call began, so the call's
		// start + delay is a lower bound. 5 ms covers committed_at being stamped in whole ms.
		const allowance = 5 * time.Millisecond
		mu.Lock()
		defer mu.Unlock()
		minMargin, maxLate := time.Hour, time.Duration(0)
		for id, start := range began {
			at, ok := firstSeen[id]
			Expect(ok).To(BeTrue(), "%s delivered", id)
			margin := at.Sub(start) - delay
			minMargin, maxLate = min(minMargin, margin), max(maxLate, margin)
			Expect(at).To(BeTemporally(">=", start.Add(delay-allowance)),
				"%s delivered %s after its produce began, before the %s delay", id, at.Sub(start), delay)
		}
		msg := fmt.Sprintf("%d records produced in %s; delivery - (produce start + %s): min %s, max %s; all delivered %s after the last produce",
			n, producedAt.Sub(began["d-000000"]).Round(time.Millisecond), delay, minMargin.Round(time.Millisecond),
			maxLate.Round(time.Millisecond), deliveredAt.Sub(producedAt).Round(time.Millisecond))
		logf("%s", msg)
		AddReportEntry("delay gate", msg)
		Expect(maxLate).To(BeNumerically("<", 10*time.Second), "a due record is delivered within 10 s of its due time")
		expectClean("delay child", hc)
	})

	It("detach stops copying and re-attach starts at the new attach point", func() {
		c := newCluster(3)
		parent, child := "reattach-parent", "reattach-child"
		createTopic(c, 0, parent)
		createChild(c, 0, parent, child, 0)
		first := waitLinkEverywhere(c, child, parent)
		hp, hc := harness.NewHistory(), harness.NewHistory()
		both := []fanRec{{hp, parent}, {hc, child}}

		// Phase 1, attached: every record reaches the child.
		const n = 30
		ok, _ := produceFan(both, c.Endpoints(), parent, "r1", n, 0)
		Expect(ok).To(Equal(n))
		drainQuiet(hc, child, c.Endpoints(), 500*time.Millisecond)

		// Detach through a node that does not lead (forwarded to the leader).
		Expect(c.Client(c.Others(leader(c))[0]).Detach(ctx(10*time.Second), parent, child)).To(Succeed())
		detached := waitLinkEverywhere(c, child, "")
		Expect(detached.Role).To(Equal(client.RoleStandalone))
		// Scenario timing: the spec stops cursors on the next reconcile tick (<= 1 s after the
		// replica applied the detach); let that pass so phase 2 runs with the cursors gone.
		<-time.After(2500 * time.Millisecond)

		// Phase 2, detached: recorded for the parent only; none may ever reach the child.
		ok, _ = produceFan([]fanRec{{hp, parent}}, c.Endpoints(), parent, "r2", n, 0)
		Expect(ok).To(Equal(n), "every detached-phase record is accepted (an ambiguous one could commit after the re-attach)")
		hw := committedTotal(c, 0, parent, 2*n)
		logf("parent committed HWMs before the re-attach: %v", hw)
		// Nothing arrives in the detached child (2 s of quiet).
		drainQuiet(hc, child, c.Endpoints(), 2*time.Second)

		// Phase 3, re-attached: a new epoch whose attach point is past every detached-phase record.
		attach(c, 1, parent, child, 0)
		second := waitLinkEverywhere(c, child, parent)
		Expect(second.AttachEpoch).NotTo(Equal(first.AttachEpoch), "a re-attach gets a fresh epoch")
		Expect(second.AttachOffsets).To(HaveLen(len(hw)))
		for p, off := range second.AttachOffsets {
			Expect(off).To(BeNumerically(">=", hw[p]), "attach point of parent partition %d is past the detached-phase records", p)
		}
		logf("re-attach: epoch %s → %s, attach offsets %v", first.AttachEpoch, second.AttachEpoch, second.AttachOffsets)
		ok, _ = produceFan(both, c.Endpoints(), parent, "r3", n, 0)
		Expect(ok).To(Equal(n))
		drain(hc, child, c.Endpoints())
		logChildren(c, 0, parent)

		var leaked []string
		for _, d := range hc.Deliveries() {
			if len(d.ID) > 2 && d.ID[:2] == "r2" {
				leaked = append(leaked, fmt.Sprintf("%s@p%d/%d", d.ID, d.Partition, d.Offset))
			}
		}
		Expect(leaked).To(BeEmpty(), "records produced while detached reached the child")
		r := expectClean("detach and re-attach", hc)
		Expect(r.Accepted).To(Equal(2 * n))
		reportDuplicates(child, r)
	})
})
