package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Frozen replicas (docs/replication.md "Leaders, followers and the ISR", "Failover", "Fencing
// and truncation"): a SIGSTOPped process holds its sockets open and answers nothing, the case a
// kill -9 does not cover. A frozen follower must leave the ISR so that produce goes on at
// R − 1 ≥ M; a frozen leader is replaced, and when it thaws it must not acknowledge anything
// for its lost epoch: what it appended alone is cut back and every 202 is delivered.

// pinnedStats counts one pinned producer's answers: 202s, 503s and every other failure.
type pinnedStats struct {
	ok, unavailable, other atomic.Int64
	firstOK                atomic.Int64 // unix nanoseconds of the first 202 after mark, 0 if none
	mark                   atomic.Int64 // unix nanoseconds from which firstOK is looked for
}

func (s *pinnedStats) String() string {
	return fmt.Sprintf("%d accepted, %d answered 503, %d other failures", s.ok.Load(), s.unavailable.Load(), s.other.Load())
}

// markFirstOK starts looking for the next 202 from now on.
func (s *pinnedStats) markFirstOK(at time.Time) {
	s.firstOK.Store(0)
	s.mark.Store(at.UnixNano())
}

// startPinned runs one producer of payloads "<prefix>-<seq>" pinned to partition p through
// eps in turn, recording every attempt in h, until ctx ends; the returned function waits for it.
func startPinned(ctx context.Context, h *harness.History, topic string, p int, prefix string, eps []harness.Endpoint) (*pinnedStats, func()) {
	st := &pinnedStats{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 0; ctx.Err() == nil; seq++ {
			ep := eps[seq%len(eps)]
			id := fmt.Sprintf("%s-%06d", prefix, seq)
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := ep.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{Partition: &p})
			cancel()
			h.Produce(topic, ep.Node, id, err)
			var apiErr *client.Error
			pause := 20 * time.Millisecond
			switch {
			case err == nil:
				st.ok.Add(1)
				if now := time.Now().UnixNano(); st.mark.Load() != 0 && now >= st.mark.Load() {
					st.firstOK.CompareAndSwap(0, now)
				}
			case errors.As(err, &apiErr) && apiErr.Status == 503:
				st.unavailable.Add(1)
				pause = 100 * time.Millisecond
			default:
				st.other.Add(1)
				pause = 100 * time.Millisecond
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
	return st, wg.Wait
}

// acceptedWithPrefix counts the accepted payloads of topic that start with prefix.
func acceptedWithPrefix(h *harness.History, topic, prefix string) int {
	n := 0
	for id := range h.Accepted(topic) {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

// allInSync waits until every partition of a 3-partition R = 3 topic has a leader and all three
// replicas in its ISR, and returns the partitions as a live node describes them.
func allInSync(c *harness.Cluster, topic string, within time.Duration) []client.PartitionStat {
	GinkgoHelper()
	out := make([]client.PartitionStat, 3)
	for p := range 3 {
		out[p] = waitPartition(topic, p, c, within, "three replicas, all in sync", func(st client.PartitionStat) bool {
			return len(st.Replicas) == 3 && len(st.ISR) == 3 && st.Leader != ""
		})
	}
	return out
}

var _ = Describe("Frozen replicas", func() {
	It("(r3) R=3 M=2: a follower SIGSTOPped for 20 s leaves the ISR while produce goes on, and after SIGCONT catches up and rejoins", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-stop-follower"
		createReplicated(c, topic)
		sts := allInSync(c, topic, 30*time.Second)
		// A follower of some partition that does not lead Raft: the freeze then tests the ISR,
		// not a Raft election.
		raft := leader(c)
		p, victim := -1, -1
		for q, st := range sts {
			for _, id := range st.Replicas {
				if i := c.Index(id); id != st.Leader && i != raft && victim < 0 {
					p, victim = q, i
				}
			}
		}
		Expect(victim).To(BeNumerically(">=", 0), "a follower that does not lead Raft among %+v", sts)
		logf("p%d: replicas %v leader %s epoch %d; freezing follower %s", p, sts[p].Replicas, sts[p].Leader, sts[p].LeaderEpoch, c.ID(victim))

		h := harness.NewHistory()
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "r3", Workers: 3, Endpoints: c.Endpoints(), Interval: 20 * time.Millisecond,
		})
		pinned, pinWait := startPinned(tctx, h, topic, p, "r3pin", c.Endpoints(c.Others(victim)...))
		cst, cwait := harness.StartClusterConsumers(tctx, h, harness.ConsumerOptions{
			Topic: topic, Workers: 2, Endpoints: c.Endpoints(c.Others(victim)...),
		})
		watch(h, topic, pst, cst)
		waitAccepted(h, topic, 100, 30*time.Second)

		pausedAt := time.Now()
		c.Pause(victim)
		shrunk := waitPartition(topic, p, c, 20*time.Second, "the frozen follower out of the isr", func(st client.PartitionStat) bool {
			return len(st.ISR) == 2 && !slices.Contains(st.ISR, c.ID(victim))
		})
		logf("p%d: isr %v at epoch %d, %s after SIGSTOP; pinned producer so far: %s", p, shrunk.ISR, shrunk.LeaderEpoch,
			time.Since(pausedAt).Round(time.Millisecond), pinned)

		// Produce on p goes on at R − 1 = 2 ≥ M while the follower is still frozen.
		base := acceptedWithPrefix(h, topic, "r3pin-")
		Eventually(func() int { return acceptedWithPrefix(h, topic, "r3pin-") - base }).
			WithTimeout(time.Until(pausedAt.Add(20*time.Second))).WithPolling(100*time.Millisecond).
			Should(BeNumerically(">=", 20), "produce pinned to p%d answers 202 with the follower out of the isr (%s)", p, pinned)
		<-time.After(time.Until(pausedAt.Add(20 * time.Second))) // scenario timing: the freeze lasts 20 s
		during := acceptedWithPrefix(h, topic, "r3pin-") - base
		c.Resume(victim)
		resumedAt := time.Now()
		logf("p%d: frozen for %s; %d pinned 202s after the shrink; pinned producer: %s", p, resumedAt.Sub(pausedAt).Round(time.Millisecond), during, pinned)
		AddReportEntry("pinned producer during the freeze", pinned.String())

		back := waitPartition(topic, p, c, 60*time.Second, "the thawed follower back in the isr", func(st client.PartitionStat) bool {
			return len(st.ISR) == 3 && slices.Contains(st.ISR, c.ID(victim))
		})
		logf("p%d: %s back in the isr %v %s after SIGCONT", p, c.ID(victim), back.ISR, time.Since(resumedAt).Round(time.Millisecond))
		allInSync(c, topic, 60*time.Second)
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 30*time.Second)
		stop()
		pwait()
		pinWait()
		cwait()
		logf("producers: %s", pst)
		logf("pinned producer: %s", pinned)
		logf("consumers: %s", cst)
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 follower frozen 20 s", h)
		logf("duplicates: %d", r.Duplicates)
	})

	It("(r4) R=3 M=2: a SIGSTOPped leader is replaced within replica-failover-after + 5 s and, after SIGCONT, is fenced, truncated and rejoins with nothing lost", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-stop-leader"
		createReplicated(c, topic)
		sts := allInSync(c, topic, 30*time.Second)
		// A partition led by a node that does not lead Raft: the failover is then timed by
		// --replica-failover-after alone, not by a Raft election on top.
		raft := leader(c)
		p := slices.IndexFunc(sts, func(st client.PartitionStat) bool { return c.Index(st.Leader) != raft })
		Expect(p).To(BeNumerically(">=", 0), "a partition led by a node other than the Raft leader among %+v", sts)
		old, oldEpoch := c.Index(sts[p].Leader), sts[p].LeaderEpoch
		logf("p%d: replicas %v leader %s epoch %d; freezing the leader", p, sts[p].Replicas, sts[p].Leader, oldEpoch)

		h := harness.NewHistory()
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "r4", Workers: 3, Endpoints: c.Endpoints(), Interval: 20 * time.Millisecond,
		})
		// Pinned to p through the two other nodes: they forward to whoever leads p.
		pinned, pinWait := startPinned(tctx, h, topic, p, "r4pin", c.Endpoints(c.Others(old)...))
		cst, cwait := harness.StartClusterConsumers(tctx, h, harness.ConsumerOptions{
			Topic: topic, Workers: 2, Endpoints: c.Endpoints(c.Others(old)...),
		})
		watch(h, topic, pst, cst)
		waitAccepted(h, topic, 100, 30*time.Second)
		Eventually(func() int { return acceptedWithPrefix(h, topic, "r4pin-") }).WithTimeout(20*time.Second).
			Should(BeNumerically(">=", 20), "produce pinned to p%d works before the freeze (%s)", p, pinned)

		pausedAt := time.Now()
		pinned.markFirstOK(pausedAt.Add(time.Second)) // a 202 in the first second may still be the old leader's
		c.Pause(old)
		within, err := time.ParseDuration(failoverAfter)
		Expect(err).NotTo(HaveOccurred())
		within += 5 * time.Second
		elected := waitPartition(topic, p, c, within, "a new leader", func(st client.PartitionStat) bool {
			return st.Leader != "" && st.Leader != sts[p].Leader && st.LeaderEpoch > oldEpoch
		})
		took := time.Since(pausedAt).Round(time.Millisecond)
		logf("p%d: %s leads at epoch %d, %s after SIGSTOP of %s (bound %s)", p, elected.Leader, elected.LeaderEpoch, took, c.ID(old), within)
		AddReportEntry("failover after SIGSTOP of the leader", took.String())
		Eventually(func() int64 { return pinned.firstOK.Load() }).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).
			ShouldNot(BeZero(), "produce pinned to p%d answers 202 from the new leader (%s)", p, pinned)
		firstOK := time.Unix(0, pinned.firstOK.Load()).Sub(pausedAt).Round(time.Millisecond)
		logf("p%d: first pinned 202 %s after SIGSTOP", p, firstOK)
		AddReportEntry("SIGSTOP of the leader to the first 202 from the new leader", firstOK.String())
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 30*time.Second)

		// Thaw the old leader and at once send it produces for p: it still believes it leads at
		// the old epoch until it hears otherwise. Any 202 it gives must be one the new leader
		// holds (forwarded, or committed in the new epoch); a 202 for the lost epoch would be
		// cut by its truncation and show up as lost in the final check.
		c.Resume(old)
		resumedAt := time.Now()
		var thawOK, thawErr, thawFenced atomic.Int64
		var wg sync.WaitGroup
		oldEp := c.Endpoint(old)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := range 10 {
					id := fmt.Sprintf("r4thaw-w%d-%03d", w, seq)
					rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					perr := oldEp.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{Partition: &p})
					cancel()
					var apiErr *client.Error
					switch {
					case h.Produce(topic, oldEp.Node, id, perr) == harness.OutcomeAccepted:
						thawOK.Add(1)
					case errors.As(perr, &apiErr) && apiErr.Status == 503 && strings.Contains(apiErr.Message, "leader deposed"):
						thawFenced.Add(1) // appended at the lost epoch, then refused: the fence at work
						thawErr.Add(1)
					default:
						thawErr.Add(1)
						logf("produce %s via the thawed %s: %v", id, oldEp.Node, perr)
					}
				}
			}()
		}
		wg.Wait()
		thaw := fmt.Sprintf("%d accepted, %d failed (%d of them 503 leader deposed)", thawOK.Load(), thawErr.Load(), thawFenced.Load())
		logf("p%d: produce through the thawed %s: %s", p, c.ID(old), thaw)
		AddReportEntry("produce through the thawed old leader", thaw)

		// The old node itself describes a later epoch once it has caught up with Raft. (Once it
		// is back in the ISR the preferred-leader rebalance may hand it p again, at a new epoch.)
		Eventually(func() error {
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			d, derr := c.Client(old).GetTopic(rctx, topic, &p)
			if derr != nil {
				return derr
			}
			for _, st := range d.PartitionStats {
				if st.Index == p && st.Leader != "" && st.LeaderEpoch > oldEpoch {
					return nil
				}
			}
			return fmt.Errorf("%s still describes %+v", c.ID(old), d.PartitionStats)
		}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the thawed old leader sees it was replaced")
		back := waitPartition(topic, p, c, 60*time.Second, "the old leader back in the isr", func(st client.PartitionStat) bool {
			return len(st.ISR) == 3 && slices.Contains(st.ISR, c.ID(old)) && st.LeaderEpoch > oldEpoch
		})
		logf("p%d: %s back in the isr %v under %s at epoch %d, %s after SIGCONT", p, c.ID(old), back.ISR, back.Leader,
			back.LeaderEpoch, time.Since(resumedAt).Round(time.Millisecond))
		// The old leader was p's preferred leader: the rebalance gives p back to it. From then
		// on it serves p's records itself, so a suffix it kept from the lost epoch would be
		// delivered at offsets the new leader already delivered with other records: the final
		// check counts those as offset conflicts.
		again := waitPartition(topic, p, c, 60*time.Second, "the old leader leading again after the preferred-leader rebalance", func(st client.PartitionStat) bool {
			return st.Leader == c.ID(old) && st.LeaderEpoch > elected.LeaderEpoch && len(st.ISR) == 3
		})
		logf("p%d: %s leads again at epoch %d, %s after SIGCONT", p, c.ID(old), again.LeaderEpoch, time.Since(resumedAt).Round(time.Millisecond))
		base := acceptedWithPrefix(h, topic, "r4pin-")
		Eventually(func() int { return acceptedWithPrefix(h, topic, "r4pin-") - base }).WithTimeout(30*time.Second).
			Should(BeNumerically(">=", 50), "produce pinned to p%d goes on under its old leader (%s)", p, pinned)
		allInSync(c, topic, 60*time.Second)
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 30*time.Second)
		stop()
		pwait()
		pinWait()
		cwait()
		logf("producers: %s", pst)
		logf("pinned producer: %s", pinned)
		logf("consumers: %s", cst)
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 leader frozen and thawed", h)
		Expect(r.Conflicts).To(BeEmpty(), "no record of the lost epoch is served next to the new leader's")
		logf("duplicates: %d", r.Duplicates)
	})
})
