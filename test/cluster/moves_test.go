package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Partition moves", func() {
	It("(m1) scale-out 3 → 4 moves exactly the surplus to the new node under produce and consume, refuses a quorum-breaking decommission, and loses nothing", func() {
		c := newCluster(3)
		topics := topicsNamed("grow", 6)
		for _, t := range topics {
			createTopic(c, 0, t)
		}
		before := ownerMap(c, 0, topics)
		Expect(ownedCounts(before)).To(Equal(map[string]int{"n1": 6, "n2": 6, "n3": 6}), "placement spreads 18 partitions evenly")

		// Three voters and nobody to promote: removing one could never complete.
		_, err := c.Client(1).Decommission(ctx(10*time.Second), "n3", false)
		var apiErr *client.Error
		Expect(errors.As(err, &apiErr)).To(BeTrue(), "decommission of a voter of three: %v", err)
		Expect(apiErr.Status).To(Equal(409))
		v, err := c.Client(2).Decommission(ctx(10*time.Second), "n3", true)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Allowed).To(BeFalse())
		Expect(v.Reasons).To(ContainElement("min_voters"))
		m, _ := member(c, 0, "n3")
		Expect(m.Draining).To(BeFalse(), "a refused decommission changes nothing")

		tr := startTraffic(topics, c.Endpoints(0, 1, 2), 10*time.Millisecond)
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 300))

		added, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		newID := c.ID(added)
		began := time.Now()
		after := waitSettled(c, 0, topics, map[string]int{"n1": 5, "n2": 5, "n3": 4, newID: 4}, 120*time.Second)
		logf("rebalance onto %s settled in %s", newID, time.Since(began).Round(time.Millisecond))
		changed := changedOwners(before, after)
		Expect(changed).To(HaveLen(4), "exactly the surplus moves: %v", changed)
		for _, ch := range changed {
			Expect(ch).To(HaveSuffix("-> "+newID), "every move goes to the new node: %v", changed)
		}
		// Owners settle on node 0 before the destination's workers have their flips' replies
		// and count them: wait for the count.
		Eventually(func() float64 {
			return metricValue(c, added, "narad_moves_total", map[string]string{"outcome": "completed"})
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(4.0))

		// Keep traffic flowing a little past the flips, through the new node too.
		n := tr.accepted()
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", n+200))
		Expect(tr.produceErrors()).To(BeZero(), "no produce was refused during the moves:%s", tr)
		tr.finish("scale-out", c.Endpoints(0, 1, 2, added))

		freeze := scrapeHistogram(c, "narad_moves_freeze_seconds", 0, 1, 2)
		summary := fmt.Sprintf("source freeze over the 4 moves: %s", freeze)
		logf("%s", summary)
		AddReportEntry("freeze", summary)
		Expect(freeze.count).To(BeNumerically(">=", 4), "every move froze its source once")
		// A correctness bound, not a speed claim: a freeze that ran to its 30 s TTL would
		// mean the handoff stalled.
		Expect(freeze.quantile(1)).To(BeNumerically("<", 30), "no freeze ran to its TTL")
	})

	It("(m2) decommissions one node of four under load: it drains to zero partitions, stays draining across a restart, leaves Raft, and nothing is lost", func() {
		c := newCluster(4)
		topics := topicsNamed("shrink", 4)
		for _, t := range topics {
			createTopic(c, 0, t)
		}
		before := ownerMap(c, 0, topics)
		lead := leader(c)
		// A voter that is not the leader: its removal needs n4's promotion first.
		victim := -1
		for _, i := range []int{1, 2, 0} {
			if m, _ := member(c, lead, c.ID(i)); i != lead && m.RaftRole == "voter" {
				victim = i
				break
			}
		}
		Expect(victim).To(BeNumerically(">=", 0))
		victimID := c.ID(victim)
		others := c.Others(victim)
		logf("decommissioning %s (owns %d partitions), leader %s", victimID, ownedCounts(before)[victimID], c.ID(lead))

		tr := startTraffic(topics, c.Endpoints(others...), 10*time.Millisecond)
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 200))

		v, err := c.Client(others[0]).Decommission(ctx(10*time.Second), victimID, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Allowed).To(BeTrue(), "dry run: %+v", v)
		m, _ := member(c, lead, victimID)
		Expect(m.Draining).To(BeFalse(), "a dry run changes nothing")
		_, err = c.Client(others[0]).Decommission(ctx(10*time.Second), victimID, false)
		Expect(err).NotTo(HaveOccurred())

		// While draining, the node refuses client produce, also after a restart.
		seq := 0
		Eventually(func() error {
			seq++
			id := fmt.Sprintf("on-draining-%d", seq)
			err := c.Client(victim).Produce(ctx(5*time.Second), topics[0], []byte(id), client.ProduceOptions{})
			tr.h.Produce(topics[0], victimID, id, err) // a 202 before the flag arrived is a real record
			return err
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("503")))
		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		m, _ = member(c, lead, victimID)
		Expect(m.Draining).To(BeTrue(), "the drain flag survives the restart")

		final := waitDecommissioned(c, others[0], victimID, 150*time.Second)
		logf("after decommission:\n%s", harness.FormatMembers(final))
		Expect(harness.AliveVoters(final)).To(Equal(3), "three voters remain")
		after := ownerMap(c, others[0], topics)
		Expect(ownedCounts(after)[victimID]).To(BeZero())
		Expect(tr.produceErrors()).To(BeZero(), "produce through the other nodes never failed:%s", tr)
		tr.finish("decommission", c.Endpoints(others...))
	})

	It("(m3) the destination killed mid-handoff: the source's freeze lapses and it keeps serving, the controller clears the move, and nothing is lost", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--move-dead-target-abort-after", "10s")
			// The fourth node dies after the fence, with the source frozen, just before it
			// would install its copy.
			o.NodeEnv = map[int][]string{3: {"NARAD_FAULTS=engine.install_before_rename=crash"}}
		})
		topics, h := topicsWithRecords(c, "handoff")
		added, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		waitCrashed(c, added, "the destination reached the install")
		frozenAt := time.Now()
		mv := theMove(c)
		src := c.Index(mv.From)
		logf("destination died with %s/%d frozen on %s", mv.Topic, mv.Partition, mv.From)

		// The frozen partition serves again once the 30 s freeze lapses: a pinned produce
		// through another node is consumed from the source.
		p := mv.Partition
		via := c.Others(src, added)[0]
		Expect(produceN(h, c.Endpoint(via), mv.Topic, "after-crash", 5, &p)).To(Equal(5))
		Eventually(func() []string {
			drainOnce(h, mv.Topic, c.Endpoints(0, 1, 2), nil)
			return h.Missing(mv.Topic)
		}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(BeEmpty(), "the source serves its partition after the freeze lapsed")
		logf("source served again %s after the destination died", time.Since(frozenAt).Round(time.Millisecond))

		// The controller clears the move aimed at the dead node after 10 s (test setting).
		Eventually(func() int {
			ms, err := c.Client(0).Moves(ctx(5*time.Second), false)
			if err != nil {
				return -1
			}
			return len(ms)
		}).WithTimeout(60 * time.Second).Should(BeZero())
		for _, t := range topics {
			drain(h, t, c.Endpoints(0, 1, 2))
		}
		expectClean("destination killed mid-handoff", h)
	})

	It("(m4) the source dies for good mid-move: the destination force-promotes its complete copy after the dead window, and the returning source's stale copy is reclaimed, never served", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--move-force-promote-after", "10s")
			// n3 is the source of the one move 6 partitions over 4 nodes need; it dies when
			// the destination arms the handoff freeze, after CatchUp copied everything.
			o.NodeEnv = map[int][]string{2: {"NARAD_FAULTS=engine.handoff_before_lock=crash"}}
		})
		topics, h := topicsWithRecords(c, "promote")
		Eventually(func() int64 {
			var n int64
			for _, t := range topics {
				hw, err := harness.HighWatermarks(ctx(5*time.Second), c.Client(0), t)
				if err != nil {
					return -1
				}
				n += harness.Sum(hw)
			}
			return n
		}).WithTimeout(20*time.Second).Should(BeEquivalentTo(120), "every record committed before the move")

		added, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		newID := c.ID(added)
		waitCrashed(c, 2, "the source reached the arm")
		diedAt := time.Now()
		mv := theMove(c)
		Expect(mv.From).To(Equal("n3"))
		Expect(mv.To).To(Equal(newID))

		var owner string
		Eventually(func() string {
			o, _, err := harness.TopicOwners(ctx(5*time.Second), c.Client(0), mv.Topic)
			if err != nil {
				return ""
			}
			owner = o[mv.Partition]
			return owner
		}).WithTimeout(90*time.Second).WithPolling(500*time.Millisecond).Should(Equal(newID), func() string {
			return "no force-promote: " + c.Tails(20)
		})
		waited := time.Since(diedAt)
		logf("force-promoted %s/%d to %s %s after the source died", mv.Topic, mv.Partition, newID, waited.Round(time.Millisecond))
		Expect(waited).To(BeNumerically(">=", 10*time.Second), "never before the source was dead for the configured window")
		// The owner change can be applied on node 0 before the destination's worker has the
		// flip's reply and counts it: wait for the count.
		Eventually(func() float64 {
			return metricValue(c, added, "narad_moves_total", map[string]string{"outcome": "force_promoted"})
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(1.0))

		// The source returns without the fault: its old copy of the moved partition is
		// judged against the new owner's marker and reclaimed; its other partitions serve again.
		c.Opts.NodeEnv = nil
		Expect(c.Restart(ctx(60*time.Second), 2)).To(Succeed())
		stale := filepath.Join(c.Node(2).DataDir, "data", "topics", mv.Topic, fmt.Sprintf("p%05d", mv.Partition))
		Eventually(func() bool { _, err := os.Stat(stale); return os.IsNotExist(err) }).WithTimeout(60*time.Second).
			WithPolling(500*time.Millisecond).Should(BeTrue(), "the returning source reclaims its stale copy")
		Expect(metricValue(c, 2, "narad_quarantined_copies", nil)).To(BeZero(), "an identical copy is reclaimed, not quarantined")
		for _, t := range topics {
			drain(h, t, c.Endpoints(0, 1, 2, added))
		}
		expectClean("force-promote", h)
	})

	It("(m5) a lost reply of a committed flip is resolved with a leader read: the install is kept and the move completes", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.NodeEnv = map[int][]string{3: {"NARAD_FAULTS=move.flip_reply=error@1"}}
		})
		topics := topicsNamed("lostreply", 2)
		for _, t := range topics {
			createTopic(c, 0, t)
		}
		before := ownerMap(c, 0, topics)
		tr := startTraffic(topics, c.Endpoints(0, 1, 2), 10*time.Millisecond)
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 100))
		added, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		newID := c.ID(added)
		after := waitSettled(c, 0, topics, map[string]int{"n1": 2, "n2": 2, "n3": 1, newID: 1}, 90*time.Second)
		Expect(changedOwners(before, after)).To(HaveLen(1))
		// The flip applies (the owners settle) before the worker, whose reply was lost, has
		// resolved the outcome with a leader read and logged it: wait for that.
		var log []byte
		Eventually(func(g Gomega) {
			var err error
			log, err = os.ReadFile(c.Node(added).LogPath)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(log)).To(ContainSubstring("move: flip outcome unknown"), "the injected lost reply happened")
			g.Expect(metricValue(c, added, "narad_moves_total", map[string]string{"outcome": "completed"})).To(Equal(1.0))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(string(log)).NotTo(ContainSubstring("copy taken off the partition path"), "the committed install was never taken back")
		Expect(metricValue(c, added, "narad_quarantined_copies", nil)).To(BeZero())
		n := tr.accepted()
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", n+100))
		Expect(tr.produceErrors()).To(BeZero(), "%s", tr)
		tr.finish("lost flip reply", c.Endpoints(0, 1, 2, added))
	})

	It("(m6) decommissioning the Raft leader moves leadership off it first; the new leader finishes the removal", func() {
		c := newCluster(4)
		topics := topicsNamed("leaderout", 2)
		for _, t := range topics {
			createTopic(c, 0, t)
		}
		lead := leader(c)
		leadID := c.ID(lead)
		others := c.Others(lead)
		tr := startTraffic(topics, c.Endpoints(others...), 20*time.Millisecond)
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 50))

		_, err := c.Client(others[0]).Decommission(ctx(10*time.Second), leadID, false)
		Expect(err).NotTo(HaveOccurred())
		final := waitDecommissioned(c, others[0], leadID, 120*time.Second)
		logf("after decommissioning the leader:\n%s", harness.FormatMembers(final))
		Expect(harness.AliveVoters(final)).To(Equal(3))
		newLead := leader(c)
		Expect(newLead).NotTo(Equal(lead))
		log, err := os.ReadFile(c.Node(lead).LogPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).To(ContainSubstring("transferring leadership off the draining leader"))
		Expect(tr.produceErrors()).To(BeZero(), "%s", tr)
		tr.finish("leader decommission", c.Endpoints(others...))
	})

	It("(m7) producers and consumers run through more than 20 moves (two scale-outs, two decommissions) with every produce answered 202 and no record lost", func() {
		c := newCluster(3)
		topics := topicsNamed("churn", 10)
		for _, t := range topics {
			createTopic(c, 0, t)
		}
		tr := startTraffic(topics, c.Endpoints(0, 1, 2), 20*time.Millisecond)
		Eventually(tr.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 300))
		completed := func(idx ...int) float64 {
			var n float64
			for _, i := range idx {
				n += metricValue(c, i, "narad_moves_total", map[string]string{"outcome": "completed"})
			}
			return n
		}

		// 30 partitions: 10/10/10 → four nodes 8/8/7/7 (7 moves) → five nodes 6 each (6 moves).
		n4, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		waitSettled(c, 0, topics, map[string]int{"n1": 8, "n2": 8, "n3": 7, "n4": 7}, 120*time.Second)
		n5, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		waitSettled(c, 0, topics, map[string]int{"n1": 6, "n2": 6, "n3": 6, "n4": 6, "n5": 6}, 120*time.Second)
		// Decommission both newcomers again: 12 more moves back onto the first three.
		for _, i := range []int{n5, n4} {
			_, err := c.Client(0).Decommission(ctx(10*time.Second), c.ID(i), false)
			Expect(err).NotTo(HaveOccurred())
		}
		waitSettled(c, 0, topics, map[string]int{"n1": 10, "n2": 10, "n3": 10}, 180*time.Second)
		moves := completed(0, 1, 2, n4, n5)
		logf("%v moves completed", moves)
		Expect(moves).To(BeNumerically(">=", 20))
		Expect(tr.produceErrors()).To(BeZero(), "every produce answered 202 through the moves:%s", tr)
		tr.finish("20 moves", c.Endpoints(0, 1, 2))
	})
})

// waitDecommissioned waits until node i lists member id with no partitions, out of the Raft
// configuration and not leading, and returns that members list.
func waitDecommissioned(c *harness.Cluster, i int, id string, within time.Duration) *client.MemberList {
	GinkgoHelper()
	var final *client.MemberList
	Eventually(func() bool {
		l, err := c.Client(i).ClusterMembers(ctx(5 * time.Second))
		if err != nil {
			return false
		}
		final = l
		for _, m := range l.Members {
			if m.ID == id {
				return m.OwnedPartitions == 0 && m.RaftRole == "none" && !m.Leader
			}
		}
		return false
	}).WithTimeout(within).WithPolling(time.Second).Should(BeTrue(), func() string {
		return "decommission of " + id + " did not finish: " + harness.FormatMembers(final) + "\n" + c.Tails(15)
	})
	return final
}

// topicsWithRecords creates two topics "<prefix>-0/1" (3 partitions each; 6 over 4 nodes is
// one move) through node 0 and produces 60 records into each.
func topicsWithRecords(c *harness.Cluster, prefix string) ([]string, *harness.History) {
	GinkgoHelper()
	topics := topicsNamed(prefix, 2)
	for _, t := range topics {
		createTopic(c, 0, t)
	}
	h := harness.NewHistory()
	for _, t := range topics {
		Expect(produceN(h, c.Endpoint(0), t, t+"-pre", 60, nil)).To(Equal(60))
	}
	return topics, h
}

// waitCrashed waits for node i to die at an injected crash point and tells the harness the
// exit was expected.
func waitCrashed(c *harness.Cluster, i int, what string) {
	GinkgoHelper()
	Eventually(func() bool { return !c.Node(i).Running() }).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).
		Should(BeTrue(), "%s and crashed", what)
	c.Kill(i)
}

// theMove returns the one move in flight.
func theMove(c *harness.Cluster) client.Move {
	GinkgoHelper()
	moves, err := c.Client(0).Moves(ctx(5*time.Second), false)
	Expect(err).NotTo(HaveOccurred())
	Expect(moves).To(HaveLen(1), "one move is in flight")
	return moves[0]
}

// drainOnce makes one pass of consume-and-ack over eps (pinned to partition p when given).
func drainOnce(h *harness.History, topic string, eps []harness.Endpoint, p *int) {
	for _, ep := range eps {
		msgs, err := ep.Client.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{Partition: p, Max: 100, Wait: 200 * time.Millisecond})
		if err != nil || len(msgs) == 0 {
			continue
		}
		ds, err := harness.ToDeliveries(msgs)
		if err != nil {
			continue
		}
		h.Deliver(topic, ep.Node, ds, false)
		_ = harness.AckAll(ctx(5*time.Second), ep.Client, topic, ds, time.Now().Add(5*time.Second))
	}
}
