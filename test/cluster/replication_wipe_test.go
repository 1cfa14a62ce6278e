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

// A wiped follower is not in sync (docs/replication.md "Losing a node and its disk"): a node that
// comes back with an empty data directory holds none of its partitions' records, whatever the
// ISR stored in Raft still says. If the leader dies before that follower has copied the log, the
// controller must elect the replica that has the records, not the empty one.

// wipeFailoverAfter is --replica-failover-after of these specs: long enough that a wiped node
// is back (ready in about 0.5–2.5 s here) before the controller would replace a leader, which
// is the case they are about.
const wipeFailoverAfter = "6s"

var _ = Describe("A wiped follower and a dead leader", func() {
	It("(r7) R=3 M=2: a follower wiped and restarted while the leader is killed -9 is not elected over the replica that holds the records", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+wipeFailoverAfter)
		})
		topic := "repl-wiped-follower"
		createReplicated(c, topic)
		sts := allInSync(c, topic, 30*time.Second)
		// A partition led by its preferred leader L whose second replica F (the first the
		// controller would try after L) and third replica K are such that K leads Raft when
		// possible: killing L and F then leaves the Raft leader up.
		raft := leader(c)
		p := slices.IndexFunc(sts, func(st client.PartitionStat) bool {
			return st.Leader == st.Replicas[0] && c.Index(st.Replicas[2]) == raft
		})
		if p < 0 {
			p = slices.IndexFunc(sts, func(st client.PartitionStat) bool { return st.Leader == st.Replicas[0] })
		}
		Expect(p).To(BeNumerically(">=", 0), "a partition led by its preferred leader among %+v", sts)
		st := sts[p]
		l, f, k := c.Index(st.Replicas[0]), c.Index(st.Replicas[1]), c.Index(st.Replicas[2])
		logf("p%d: replicas %v leader %s epoch %d; Raft leader %s", p, st.Replicas, st.Leader, st.LeaderEpoch, c.ID(raft))

		h := harness.NewHistory()
		Expect(produceN(h, c.Endpoint(k), topic, "r7", 300, &p)).To(Equal(300), "every produce with all replicas in sync answers 202")
		waitPartition(topic, p, c, 30*time.Second, "every replica in sync after the produce", func(now client.PartitionStat) bool {
			return len(now.ISR) == 3
		})

		// F loses its disk and comes back at once; L dies before F could copy anything from it.
		Expect(c.Wipe(f)).To(Succeed())
		c.Kill(l)
		killedAt := time.Now()
		Expect(c.Restart(ctx(60*time.Second), f)).To(Succeed())
		elected := waitPartition(topic, p, c, 30*time.Second, "a new leader", func(now client.PartitionStat) bool {
			return now.Leader != "" && now.Leader != st.Leader && now.LeaderEpoch > st.LeaderEpoch
		})
		logf("p%d: %s leads at epoch %d with isr %v, %s after the kill (wiped %s, intact %s)", p, elected.Leader,
			elected.LeaderEpoch, elected.ISR, time.Since(killedAt).Round(time.Millisecond), c.ID(f), c.ID(k))
		Expect(c.Restart(ctx(60*time.Second), l)).To(Succeed())
		allInSync(c, topic, 90*time.Second)
		preferredLeads(c, topic, p)
		Expect(produceSettled(h, c.Endpoint(k), topic, "r7-after", 20, &p)).To(Equal(20), "produce works once every replica is back")
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 wiped follower, leader killed", h)
		logf("duplicates: %d", r.Duplicates)
	})
})

var _ = Describe("A wiped leader back before the failover", func() {
	It("(r8) R=3 M=2: a leader killed -9 with its data directory deleted and restarted at once hands its leadership to an in-sync replica, and every 202 is delivered", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+wipeFailoverAfter)
		})
		topic := "repl-wiped-leader"
		createReplicated(c, topic)
		sts := allInSync(c, topic, 30*time.Second)
		p := 0
		st := sts[p]
		l := c.Index(st.Leader)
		other := c.Others(l)[0]
		logf("p%d: replicas %v leader %s epoch %d", p, st.Replicas, st.Leader, st.LeaderEpoch)

		h := harness.NewHistory()
		Expect(produceN(h, c.Endpoint(other), topic, "r8", 300, &p)).To(Equal(300), "every produce with all replicas in sync answers 202")

		// The restart takes less than --replica-failover-after: the controller never sees the
		// leader gone, so the metastore still names it leader when it comes back empty.
		Expect(c.Wipe(l)).To(Succeed())
		killedAt := time.Now()
		Expect(c.Restart(ctx(60*time.Second), l)).To(Succeed())
		logf("p%d: %s wiped and ready again %s after the kill", p, st.Leader, time.Since(killedAt).Round(time.Millisecond))
		elected := waitPartition(topic, p, c, 30*time.Second, "an in-sync replica leads", func(now client.PartitionStat) bool {
			return now.Leader != "" && now.Leader != st.Leader && now.LeaderEpoch > st.LeaderEpoch
		})
		logf("p%d: %s leads at epoch %d with isr %v, %s after the kill", p, elected.Leader, elected.LeaderEpoch, elected.ISR,
			time.Since(killedAt).Round(time.Millisecond))
		back := waitPartition(topic, p, c, 90*time.Second, "the wiped replica back in sync", func(now client.PartitionStat) bool {
			return len(now.ISR) == 3
		})
		logf("p%d: isr %v under %s at epoch %d, %s after the kill", p, back.ISR, back.Leader, back.LeaderEpoch, time.Since(killedAt).Round(time.Millisecond))
		preferredLeads(c, topic, p)
		Expect(produceSettled(h, c.Endpoint(other), topic, "r8-after", 20, &p)).To(Equal(20), "produce works once every replica is back")
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 wiped leader back at once", h)
		logf("duplicates: %d", r.Duplicates)
	})
})

// preferredLeads waits until partition p of topic is led by its preferred replica with every
// replica in sync: once the replicas are back, the preferred-leader rebalance moves the
// leadership home, and a produce sent during that handover may get a brief 503 to retry.
func preferredLeads(c *harness.Cluster, topic string, p int) {
	waitPartition(topic, p, c, 60*time.Second, "the preferred leader back", func(now client.PartitionStat) bool {
		return len(now.Replicas) > 0 && now.Leader == now.Replicas[0] && len(now.ISR) == len(now.Replicas)
	})
}

// produceSettled produces n payloads through ep as produceN does, and produces again, under
// new ids, for those that did not get a 202, for up to 20 s. The preferred leader reads as
// leading in the metadata a moment before it has taken the leadership up and the old leader
// has let go, so a produce in between can get the retryable 503 of a leadership handover
// (outcome unknown, recorded as such); a client retries it. It returns how many were accepted.
func produceSettled(h *harness.History, ep harness.Endpoint, topic, prefix string, n int, partition *int) int {
	ok := 0
	for attempt, until := 0, time.Now().Add(20*time.Second); ok < n && time.Now().Before(until); attempt++ {
		ok += produceN(h, ep, topic, fmt.Sprintf("%s-%d", prefix, attempt), n-ok, partition)
	}
	return ok
}
