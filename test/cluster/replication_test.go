package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Replicated partitions (docs/replication.md): a partition lives on R nodes, 202 means fsynced
// on at least min_insync_replicas of them, and losing a node with its disk loses nothing.

// failoverAfter is --replica-failover-after of the replication specs: short, so a spec that
// kills three leaders in turn stays well inside its budget.
const failoverAfter = "2s"

// createReplicated creates a 3-partition topic with R = 3, M = 2 through node 0 and waits until
// every live node sees every partition assigned.
func createReplicated(c *harness.Cluster, name string) {
	GinkgoHelper()
	_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), client.CreateTopicRequest{
		Name: name, Partitions: 3, VisibilityTimeoutMs: visibilityMs, ReplicationFactor: 3, MinInsyncReplicas: 2})
	Expect(err).NotTo(HaveOccurred(), "create %s", name)
	waitTopicEverywhere(c, name)
}

// partitionView is one partition as a live node describes it.
func partitionView(c *harness.Cluster, topic string, p int) (client.PartitionStat, error) {
	var last error
	for _, i := range c.Live() {
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		d, err := c.Client(i).GetTopic(rctx, topic, &p)
		cancel()
		if err != nil {
			last = err
			continue
		}
		for _, st := range d.PartitionStats {
			if st.Index == p {
				return st, nil
			}
		}
	}
	return client.PartitionStat{}, fmt.Errorf("no live node describes %s/%d: %v", topic, p, last)
}

// waitPartition waits until a live node describes topic/p so that cond holds.
func waitPartition(topic string, p int, c *harness.Cluster, within time.Duration, what string, cond func(client.PartitionStat) bool) client.PartitionStat {
	GinkgoHelper()
	var st client.PartitionStat
	Eventually(func() bool {
		now, err := partitionView(c, topic, p)
		if err != nil {
			return false
		}
		st = now // the last view seen, for the failure message
		return cond(st)
	}).WithTimeout(within).WithPolling(200*time.Millisecond).Should(BeTrue(), "%s/%d: %s (last seen %+v)", topic, p, what, st)
	return st
}

var _ = Describe("Replicated partitions", func() {
	It("(r1) R=3 M=2: the leader of every partition in turn is killed -9 with its data directory deleted, and every 202 is delivered", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-wipe"
		createReplicated(c, topic)
		for p := range 3 {
			st := waitPartition(topic, p, c, 30*time.Second, "three replicas, all in sync", func(st client.PartitionStat) bool {
				return len(st.Replicas) == 3 && len(st.ISR) == 3 && st.Leader != ""
			})
			logf("p%d: replicas %v leader %s epoch %d", p, st.Replicas, st.Leader, st.LeaderEpoch)
		}

		h := harness.NewHistory()
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "r1", Workers: 3, Endpoints: c.Endpoints(), Interval: 20 * time.Millisecond,
		})
		watch(h, topic, pst, &harness.TrafficStats{})
		waitAccepted(h, topic, 100, 30*time.Second)

		for p := range 3 {
			st := waitPartition(topic, p, c, 90*time.Second, "all replicas in sync", func(st client.PartitionStat) bool {
				return len(st.ISR) == 3
			})
			victim := c.Index(st.Leader)
			Expect(victim).To(BeNumerically(">=", 0), "leader %s of p%d is a node of the cluster", st.Leader, p)
			before := len(h.Accepted(topic))
			logf("p%d: wiping its leader %s (epoch %d) with %d accepted so far", p, st.Leader, st.LeaderEpoch, before)
			Expect(c.Wipe(victim)).To(Succeed())
			killedAt := time.Now()
			elected := waitPartition(topic, p, c, 30*time.Second, "a new leader", func(now client.PartitionStat) bool {
				return now.Leader != "" && now.Leader != st.Leader && now.LeaderEpoch > st.LeaderEpoch
			})
			logf("p%d: %s leads at epoch %d, %s after the kill", p, elected.Leader, elected.LeaderEpoch,
				time.Since(killedAt).Round(time.Millisecond))
			Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
			Expect(c.WaitMember(ctx(60*time.Second), c.ID(victim), client.StatusAlive)).To(Succeed())
			back := waitPartition(topic, p, c, 90*time.Second, "the wiped replica back in sync", func(now client.PartitionStat) bool {
				return slices.Contains(now.ISR, st.Leader) && len(now.ISR) == 3
			})
			logf("p%d: %s back in the isr %v, %s after the kill", p, st.Leader, back.ISR, time.Since(killedAt).Round(time.Millisecond))
			Expect(len(h.Accepted(topic))).To(BeNumerically(">", before), "producers got 202s while p%d failed over", p)
		}
		stop()
		pwait()
		logf("producers: %s", pst)
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 leader wipes", h)
		logf("duplicates: %d", r.Duplicates)
	})
})

var _ = Describe("Replicated partitions below min_insync_replicas", func() {
	It("(r2) R=3 M=3: with one replica down the partition refuses produce with 503 not_enough_replicas, loses nothing, and recovers when it returns", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-min-isr"
		_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), client.CreateTopicRequest{
			Name: topic, Partitions: 3, VisibilityTimeoutMs: visibilityMs, ReplicationFactor: 3, MinInsyncReplicas: 3})
		Expect(err).NotTo(HaveOccurred())
		waitTopicEverywhere(c, topic)
		p := 0
		st := waitPartition(topic, p, c, 30*time.Second, "all replicas in sync", func(st client.PartitionStat) bool {
			return len(st.ISR) == 3
		})
		h := harness.NewHistory()
		leaderIdx := c.Index(st.Leader)
		ep := c.Endpoint(leaderIdx)
		Expect(produceN(h, ep, topic, "before", 20, &p)).To(Equal(20), "every produce with all replicas in sync answers 202")

		// A follower goes down: after the shrink the ISR has 2 < 3 members.
		victim := -1
		for _, id := range st.Replicas {
			if id != st.Leader && c.Index(id) != leader(c) {
				victim = c.Index(id)
				break
			}
		}
		if victim < 0 { // both followers lead Raft? only one can: take the other follower
			for _, id := range st.Replicas {
				if id != st.Leader {
					victim = c.Index(id)
				}
			}
		}
		c.Kill(victim)
		logf("killed follower %s of p%d", c.ID(victim), p)
		waitPartition(topic, p, c, 45*time.Second, "the dead follower out of the isr", func(now client.PartitionStat) bool {
			return len(now.ISR) == 2
		})
		expectUnderMinISRShown(c, leaderIdx, topic, p)
		var apiErr *client.Error
		Eventually(func() bool {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			perr := ep.Client.Produce(rctx, topic, []byte("refused"), client.ProduceOptions{Partition: &p})
			h.Produce(topic, ep.Node, fmt.Sprintf("refused-%d", time.Now().UnixNano()), perr)
			return errors.As(perr, &apiErr) && apiErr.Status == 503 && apiErr.Message == "not_enough_replicas"
		}).WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "produce below min ISR answers 503 not_enough_replicas (last: %v)", apiErr)

		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		waitPartition(topic, p, c, 60*time.Second, "the follower back in the isr", func(now client.PartitionStat) bool {
			return len(now.ISR) == 3
		})
		Eventually(func() bool {
			ps, err := c.Client(leaderIdx).AllClusterPartitions(ctx(5*time.Second), true)
			return err == nil && !slices.ContainsFunc(ps, func(x client.PartitionReplicas) bool { return x.Topic == topic && x.Partition == p })
		}).WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "p%d leaves the under-replicated listing", p)
		// The leader installs the ISR it proposed a moment after other nodes apply it.
		Eventually(func() error {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			id := fmt.Sprintf("first-after-%d", time.Now().UnixNano())
			perr := ep.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{Partition: &p})
			h.Produce(topic, ep.Node, id, perr)
			return perr
		}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "produce works again once the follower is back")
		Expect(produceN(h, ep, topic, "after", 20, &p)).To(Equal(20), "every produce after the recovery answers 202")
		drain(h, topic, c.Endpoints())
		expectClean("R=3 M=3 below min ISR", h)
	})
})

// expectUnderMinISRShown checks that GET /v1/cluster/partitions?under_replicated=true lists
// topic/p with its 2-member ISR below M = 3, and that the leader's metrics show it: ISR 2 of 3
// replicas, one partition under min ISR, a shrink counted and replication bytes served.
func expectUnderMinISRShown(c *harness.Cluster, leaderIdx int, topic string, p int) {
	GinkgoHelper()
	var last []client.PartitionReplicas
	Eventually(func() bool {
		ps, err := c.Client(leaderIdx).AllClusterPartitions(ctx(5*time.Second), true)
		last = ps
		i := slices.IndexFunc(ps, func(x client.PartitionReplicas) bool { return x.Topic == topic && x.Partition == p })
		return err == nil && i >= 0 && ps[i].UnderReplicated && ps[i].UnderMinISR && len(ps[i].ISR) == 2 &&
			ps[i].ReplicationFactor == 3 && ps[i].MinInsyncReplicas == 3
	}).WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), func() string {
		return fmt.Sprintf("p%d listed under-replicated (last %+v)", p, last)
	})
	var seen string
	Eventually(func() bool {
		e, err := harness.ScrapeMetrics(ctx(5*time.Second), c.URL(leaderIdx))
		if err != nil {
			return false
		}
		tp := map[string]string{"topic": topic, "partition": fmt.Sprint(p)}
		reps, _ := e.Value("narad_partition_replicas", tp)
		isr, _ := e.Value("narad_partition_isr", tp)
		under, _ := e.Value("narad_under_min_isr_partitions", nil)
		shrinks, _ := e.Value("narad_isr_changes_total", map[string]string{"change": "shrink"})
		out, _ := e.Value("narad_replication_bytes_total", map[string]string{"direction": "out"})
		seen = fmt.Sprintf("replicas %v isr %v under_min_isr %v shrinks %v bytes_out %v", reps, isr, under, shrinks, out)
		return reps == 3 && isr == 2 && under >= 1 && shrinks >= 1 && out > 0
	}).WithTimeout(20*time.Second).WithPolling(500*time.Millisecond).Should(BeTrue(), func() string {
		return "the leader's replication metrics (last: " + seen + ")"
	})
}
