package cluster_test

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Replica balance (docs/replication.md#balancing-replicas-and-leaders): when a node joins, the
// controller moves replicas of replicated partitions to it (add, catch up, hand on leadership,
// drop) until every node holds within one replica of the others, each move recorded and listed
// in GET /v1/cluster/moves while in flight.

// replicaCounts describes every partition of topic from a live node: replicas per node, and
// whether every partition has r replicas, all in sync, with a leader.
func replicaCounts(c *harness.Cluster, topic string, partitions, r int) (map[string]int, bool, error) {
	counts := map[string]int{}
	settled := true
	for p := range partitions {
		st, err := partitionView(c, topic, p)
		if err != nil {
			return nil, false, err
		}
		if len(st.Replicas) != r || len(st.ISR) != r || st.Leader == "" {
			settled = false
		}
		for _, id := range st.Replicas {
			counts[id]++
		}
	}
	return counts, settled, nil
}

var _ = Describe("Replica balance", func() {
	It("(r14) R=3 with 6 partitions on 3 nodes: a 4th node joins while producers run; replicas move to it until every node holds 4–5, all ISRs full, and every 202 is delivered", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic, partitions := "repl-balance", 6
		_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), client.CreateTopicRequest{
			Name: topic, Partitions: partitions, VisibilityTimeoutMs: visibilityMs, ReplicationFactor: 3, MinInsyncReplicas: 2})
		Expect(err).NotTo(HaveOccurred())
		waitTopicEverywhere(c, topic)
		waitReplicaSets(c, topic, partitions, 3, 60*time.Second)

		h := harness.NewHistory()
		stop, pst := producing(h, topic, "r14", c.Endpoints(0, 1, 2))
		added, err := c.AddNode(ctx(60 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		newID := c.ID(added)
		began := time.Now()
		logf("%s joined", newID)

		// A replica move to the new node is listed while in flight, with its target.
		var listed client.Move
		Eventually(func() bool {
			mvs, err := c.Client(0).Moves(ctx(5*time.Second), false)
			if err != nil {
				return false
			}
			for _, mv := range mvs {
				if mv.Topic == topic && mv.To == newID && len(mv.TargetReplicas) == 3 && slices.Contains(mv.TargetReplicas, newID) &&
					!slices.Contains(mv.TargetReplicas, mv.From) {
					listed = mv
					return true
				}
			}
			return false
		}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "a replica move to %s in GET /v1/cluster/moves", newID)
		logf("listed: %s/%d %s → %s replicas %v isr %v target %v", listed.Topic, listed.Partition, listed.From, listed.To,
			listed.Replicas, listed.ISR, listed.TargetReplicas)

		// Settled: 4 or 5 replicas on every node, every ISR full, no move in flight.
		var counts map[string]int
		Eventually(func() error {
			now, settled, err := replicaCounts(c, topic, partitions, 3)
			if err != nil {
				return err
			}
			counts = now
			if !settled {
				return fmt.Errorf("replica sets not settled: %v", now)
			}
			for i := range 4 {
				if n := now[c.ID(i)]; n < 4 || n > 5 {
					return fmt.Errorf("%s holds %d replicas: %v", c.ID(i), n, now)
				}
			}
			mvs, err := c.Client(0).Moves(ctx(5*time.Second), false)
			if err != nil {
				return err
			}
			if len(mvs) != 0 {
				return fmt.Errorf("%d moves in flight", len(mvs))
			}
			return nil
		}).WithTimeout(180 * time.Second).WithPolling(time.Second).Should(Succeed())
		logf("balanced in %s: %v", time.Since(began).Round(time.Millisecond), counts)
		for p := range partitions {
			st, err := partitionView(c, topic, p)
			Expect(err).NotTo(HaveOccurred())
			logf("p%d: replicas %v isr %v leader %s epoch %d", p, st.Replicas, st.ISR, st.Leader, st.LeaderEpoch)
		}

		// Stays balanced: a few more passes change nothing.
		Consistently(func() map[string]int {
			now, _, err := replicaCounts(c, topic, partitions, 3)
			if err != nil {
				return counts
			}
			return now
		}).WithTimeout(5*time.Second).WithPolling(time.Second).Should(Equal(counts), "no further moves once balanced")

		before := len(h.Accepted(topic))
		waitAccepted(h, topic, before+50, 30*time.Second)
		stop()
		logf("producers: %s", pst)
		drain(h, topic, c.Endpoints(0, 1, 2, added))
		r := expectClean("R=3 scale-up balance", h)
		logf("duplicates: %d", r.Duplicates)
	})
})
