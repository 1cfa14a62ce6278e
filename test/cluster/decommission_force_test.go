package cluster_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Forced decommission (docs/replication.md "Decommissioning a dead node"): a dead node that
// owns single-replica partitions is refused with dead_owner until the request says force and
// names exactly those partitions; then each restarts, empty at offset 0, on a live node, and
// the answer lists exactly what was lost.
var _ = Describe("Forced decommission", func() {
	It("(r13) an R=1 owner killed -9 for good: refused with dead_owner, forced naming its partitions answers exactly them lost; they serve again from offset 0 and every other 202 is delivered", func() {
		c := newCluster(4) // 3 voters + 1 non-voter: a dead voter can go (the non-voter is promoted)
		topic := "force-r1"
		const partitions, perPartition = 8, 20
		_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), client.CreateTopicRequest{
			Name: topic, Partitions: partitions, VisibilityTimeoutMs: visibilityMs})
		Expect(err).NotTo(HaveOccurred())
		waitTopicEverywhere(c, topic)

		// The victim: a node that owns a partition and does not lead Raft.
		lead := leader(c)
		owners := make([]string, partitions)
		for p := range partitions {
			st := waitPartition(topic, p, c, 30*time.Second, "an owner", func(st client.PartitionStat) bool { return st.OwnerNode != "" })
			owners[p] = st.OwnerNode
		}
		victim, _ := ownerNotLeader(c, owners, lead)
		victimID := c.ID(victim)
		others := c.Others(victim)
		var lose []client.PartitionRef
		for p, o := range owners {
			if o == victimID {
				lose = append(lose, client.PartitionRef{Topic: topic, Partition: p})
			}
		}
		logf("owners %v; victim %s owns %v; raft leader %s", owners, victimID, lose, c.ID(lead))

		// Every partition gets perPartition 202s; the victim's go to lost, which nothing checks
		// for delivery: they are what the forced decommission gives up.
		h, lost := harness.NewHistory(), harness.NewHistory()
		ep := c.Endpoint(others[0])
		for p := range partitions {
			into := h
			if owners[p] == victimID {
				into = lost
			}
			Expect(produceN(into, ep, topic, fmt.Sprintf("p%d", p), perPartition, &p)).To(Equal(perPartition))
		}

		// Every record of the victim's partitions is on its disk before it dies (none is left in
		// another node's ingress WAL, which would deliver it to the new owner later).
		for _, r := range lose {
			waitPartition(topic, r.Partition, c, 30*time.Second, "every record at the owner", func(st client.PartitionStat) bool {
				return st.HighWatermark == perPartition
			})
		}
		c.Kill(victim)
		Expect(c.WaitMember(ctx(60*time.Second), victimID, client.StatusDead)).To(Succeed())
		admin := c.Client(others[1])

		// Without force: 409 dead_owner, nothing changed.
		var apiErr *client.Error
		Eventually(func() []string {
			_, err := admin.Decommission(ctx(10*time.Second), victimID, false)
			if !errors.As(err, &apiErr) || apiErr.Status != 409 {
				return nil
			}
			return apiErr.Reasons
		}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(ContainElement("dead_owner"))
		// Force naming all but the first: 409 listing exactly that one.
		_, err = admin.DecommissionForce(ctx(10*time.Second), victimID, lose[1:])
		Expect(errors.As(err, &apiErr)).To(BeTrue(), "force with a partial list: %v", err)
		Expect(apiErr.Status).To(Equal(409))
		Expect(apiErr.Missing).To(Equal(lose[:1]))
		Expect(apiErr.Reasons).To(ContainElement("dead_owner"))
		m := memberOf(c, others[0], victimID)
		Expect(m.Draining).To(BeFalse(), "a refused decommission changes nothing")

		// Force naming every one: 200 listing exactly them, each on a live node from offset 0.
		out, err := admin.DecommissionForce(ctx(10*time.Second), victimID, lose)
		Expect(err).NotTo(HaveOccurred())
		logf("forced decommission: %+v", out)
		Expect(out.Forced).To(BeTrue())
		got := make([]client.PartitionRef, 0, len(out.Lost))
		for _, l := range out.Lost {
			got = append(got, client.PartitionRef{Topic: l.Topic, Partition: l.Partition})
			Expect(l.Owner).To(Equal(victimID))
			Expect(l.RestartsAt).To(BeZero())
			Expect(slices.Contains(liveIDs(c), l.NewOwner)).To(BeTrue(), "new owner %s is live", l.NewOwner)
		}
		sort.Slice(got, func(i, j int) bool { return got[i].Partition < got[j].Partition })
		Expect(got).To(Equal(lose))

		// The lost partitions take produce again on their new owners, starting at offset 0.
		for _, l := range out.Lost {
			p := l.Partition
			st := waitPartition(topic, p, c, 30*time.Second, "the new owner", func(st client.PartitionStat) bool {
				return st.OwnerNode == l.NewOwner && st.Available
			})
			Expect(st.NextOffset).To(BeZero(), "p%d restarts empty at offset 0", p)
			Eventually(func() error {
				return c.Client(others[0]).Produce(ctx(10*time.Second), topic, []byte(fmt.Sprintf("probe-p%d", p)),
					client.ProduceOptions{Partition: &p})
			}).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "produce to p%d after the force", p)
			h.Produce(topic, ep.Node, fmt.Sprintf("probe-p%d", p), nil)
			Expect(produceN(h, ep, topic, fmt.Sprintf("new-p%d", p), perPartition, &p)).To(Equal(perPartition))
			st = waitPartition(topic, p, c, 10*time.Second, "every new record visible", func(st client.PartitionStat) bool {
				return st.HighWatermark == perPartition+1
			})
			Expect(st.OldestOffset).To(BeZero())
		}

		final := waitDecommissioned(c, others[0], victimID, 150*time.Second)
		logf("after the forced decommission:\n%s", harness.FormatMembers(final))
		drain(h, topic, c.Endpoints(others...))
		r := expectClean("forced decommission", h)
		logf("lost by the force: %d 202'd records of %d partitions; duplicates %d", len(lost.Accepted(topic)), len(lose), r.Duplicates)
	})
})

// memberOf returns member id as node i lists it.
func memberOf(c *harness.Cluster, i int, id string) client.Member {
	GinkgoHelper()
	l, err := c.Client(i).ClusterMembers(ctx(10 * time.Second))
	Expect(err).NotTo(HaveOccurred())
	for _, m := range l.Members {
		if m.ID == id {
			return m
		}
	}
	Fail("no member " + id)
	return client.Member{}
}

// liveIDs returns the IDs of the nodes still running.
func liveIDs(c *harness.Cluster) []string {
	var out []string
	for _, i := range c.Live() {
		out = append(out, c.ID(i))
	}
	return out
}
