package cluster_test

import (
	"context"
	"errors"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Replica reassignment (docs/replication.md, docs/internals/replication.md §9): the controller
// brings every replicated partition to its desired replica set — after a decommission, after
// --re-replicate-after, after a change of replication_factor — by adding the new replicas out
// of sync, letting them catch up, moving leadership off a leaving leader and dropping the rest.

// waitReplicaSets waits until every partition of topic has r replicas, all in sync, none of
// them on a node of gone.
func waitReplicaSets(c *harness.Cluster, topic string, partitions, r int, within time.Duration, gone ...string) {
	GinkgoHelper()
	for p := range partitions {
		st := waitPartition(topic, p, c, within, "the desired replica set, all in sync", func(st client.PartitionStat) bool {
			if len(st.Replicas) != r || len(st.ISR) != r || st.Leader == "" {
				return false
			}
			for _, id := range gone {
				if slices.Contains(st.Replicas, id) {
					return false
				}
			}
			return true
		})
		logf("p%d: replicas %v isr %v leader %s epoch %d", p, st.Replicas, st.ISR, st.Leader, st.LeaderEpoch)
	}
}

// producing starts cluster producers on topic through eps and waits for their first 100 202s.
func producing(h *harness.History, topic, prefix string, eps []harness.Endpoint) (stop func(), stats *harness.TrafficStats) {
	GinkgoHelper()
	tctx, cancel := context.WithCancel(context.Background())
	pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
		Topic: topic, Prefix: prefix, Workers: 3, Endpoints: eps, Interval: 20 * time.Millisecond,
	})
	watch(h, topic, pst, &harness.TrafficStats{})
	waitAccepted(h, topic, 100, 30*time.Second)
	return func() { cancel(); pwait() }, pst
}

var _ = Describe("Replica reassignment", func() {
	It("(r10) R=3 on 4 nodes: a node killed -9 with its disk wiped is decommissioned while producers run; its replicas are rebuilt on the others and every 202 is delivered", func() {
		c := newCluster(4, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-decom"
		createReplicated(c, topic)
		waitReplicaSets(c, topic, 3, 3, 60*time.Second)

		// The victim: the leader of a partition that does not lead Raft (its partitions fail
		// over first), else any replica that does not lead Raft.
		lead := leader(c)
		victim := -1
		for p := range 3 {
			st, err := partitionView(c, topic, p)
			Expect(err).NotTo(HaveOccurred())
			if i := c.Index(st.Leader); victim < 0 && i >= 0 && i != lead {
				victim = i
			}
		}
		if victim < 0 {
			st, err := partitionView(c, topic, 0)
			Expect(err).NotTo(HaveOccurred())
			for _, id := range st.Replicas {
				if i := c.Index(id); victim < 0 && i >= 0 && i != lead {
					victim = i
				}
			}
		}
		Expect(victim).To(BeNumerically(">=", 0))
		victimID := c.ID(victim)
		others := c.Others(victim)

		h := harness.NewHistory()
		stop, pst := producing(h, topic, "r3", c.Endpoints(others...))
		before := len(h.Accepted(topic))
		logf("wiping %s with %d accepted so far", victimID, before)
		Expect(c.Wipe(victim)).To(Succeed())
		Expect(c.WaitMember(ctx(60*time.Second), victimID, client.StatusDead)).To(Succeed())

		var (
			v   *client.DecommissionVerdict
			err error
		)
		Eventually(func() error {
			v, err = c.Client(others[0]).Decommission(ctx(10*time.Second), victimID, false)
			return err
		}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(Succeed(), "decommission of the dead %s", victimID)
		logf("decommission verdict: %+v", v)

		waitReplicaSets(c, topic, 3, 3, 150*time.Second, victimID)
		final := waitDecommissioned(c, others[0], victimID, 120*time.Second)
		logf("after decommission:\n%s", harness.FormatMembers(final))
		Expect(len(h.Accepted(topic))).To(BeNumerically(">", before), "producers got 202s during the reassignment")
		stop()
		logf("producers: %s", pst)
		drain(h, topic, c.Endpoints(others...))
		r := expectClean("R=3 dead-node decommission", h)
		logf("duplicates: %d", r.Duplicates)
	})

	It("(r11) replication_factor altered 2 → 3 → 2 on a live topic while producers run; 1 ↔ 3 is refused", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-alter"
		_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), client.CreateTopicRequest{
			Name: topic, Partitions: 3, VisibilityTimeoutMs: visibilityMs, ReplicationFactor: 2, MinInsyncReplicas: 1})
		Expect(err).NotTo(HaveOccurred())
		waitTopicEverywhere(c, topic)
		waitReplicaSets(c, topic, 3, 2, 60*time.Second)

		h := harness.NewHistory()
		stop, pst := producing(h, topic, "r4", c.Endpoints())
		for _, r := range []int{3, 2} {
			before := len(h.Accepted(topic))
			rf := r
			t, err := c.Client(1).AlterTopic(ctx(10*time.Second), topic, client.AlterTopicRequest{ReplicationFactor: &rf})
			Expect(err).NotTo(HaveOccurred(), "alter to R=%d", r)
			Expect(t.ReplicationFactor).To(Equal(r))
			waitReplicaSets(c, topic, 3, r, 90*time.Second)
			waitAccepted(h, topic, before+50, 30*time.Second)
		}
		one, m := 1, 3
		var apiErr *client.Error
		_, err = c.Client(0).AlterTopic(ctx(10*time.Second), topic, client.AlterTopicRequest{ReplicationFactor: &one})
		Expect(errors.As(err, &apiErr) && apiErr.Status == 409).To(BeTrue(), "R 2 → 1: %v", err)
		_, err = c.Client(0).AlterTopic(ctx(10*time.Second), topic, client.AlterTopicRequest{MinInsyncReplicas: &m})
		Expect(errors.As(err, &apiErr) && apiErr.Status == 400).To(BeTrue(), "M 3 above R 2: %v", err)
		stop()
		logf("producers: %s", pst)
		drain(h, topic, c.Endpoints())
		r := expectClean("R altered 2 → 3 → 2", h)
		logf("duplicates: %d", r.Duplicates)
	})
})
