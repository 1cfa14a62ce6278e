package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/brokertest"
)

var _ = Describe("NaradCluster status", func() {
	It("shows the brokers' members, leader and moves, and the conditions they imply", func() {
		nc := testCluster("st", withFakeAdmin)
		runningCluster(nc, "rev1")
		currentFake().Update(func(c *brokertest.Cluster) {
			c.Members[1].RaftRole = "nonvoter"
			c.Members[2].OwnedPartitions = 7
			c.Members = append(c.Members,
				client.Member{ID: "st-9", Status: client.StatusDead, RaftRole: "none", OwnedPartitions: 1},
				client.Member{ID: "st-8", Status: client.StatusDead, RaftRole: "none"}) // left: not listed
			c.Moves = []client.Move{
				{Topic: "orders", Partition: 1, From: "st-0", To: "st-1"},
				{Topic: "orders", Partition: 2, From: "st-9", To: "st-2", Blocked: []string{"source_dead"}},
			}
		})

		Eventually(func(g Gomega) {
			var got naradv1.NaradCluster
			mustGet(nc.Name, &got)
			st := got.Status
			g.Expect(st.Leader).To(Equal("st-0"))
			g.Expect(st.ReadyReplicas).To(Equal(int32(3)))
			g.Expect(st.Replicas).To(Equal(int32(3)))
			g.Expect(st.Members).To(Equal([]naradv1.MemberStatus{
				{Pod: "st-0", NodeID: "st-0", RaftRole: "voter", Status: "alive", OwnedPartitions: 4},
				{Pod: "st-1", NodeID: "st-1", RaftRole: "nonvoter", Status: "alive", OwnedPartitions: 4},
				{Pod: "st-2", NodeID: "st-2", RaftRole: "voter", Status: "alive", OwnedPartitions: 7},
				{NodeID: "st-9", RaftRole: "none", Status: "dead", OwnedPartitions: 1},
			}))
			g.Expect(st.Moves).To(Equal(naradv1.MovesStatus{InFlight: 2, Blocked: []naradv1.BlockedMove{
				{Topic: "orders", Partition: 2, From: "st-9", To: "st-2", Reasons: []string{"source_dead"}},
			}}))
			for _, c := range st.Conditions {
				g.Expect(c.ObservedGeneration).To(Equal(got.Generation), c.Type)
			}
			g.Expect(findCondition(st.Conditions, naradv1.ConditionReady)).To(haveCondition(metav1.ConditionTrue, ReasonClusterReady))
			g.Expect(findCondition(st.Conditions, naradv1.ConditionRebalancing)).To(haveCondition(metav1.ConditionTrue, ReasonMovesInFlight))
			g.Expect(findCondition(st.Conditions, naradv1.ConditionProgressing)).To(haveCondition(metav1.ConditionFalse, ReasonSettled))
		}).Should(Succeed())

		By("the moves finishing")
		currentFake().Update(func(c *brokertest.Cluster) { c.Moves = nil })
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionRebalancing) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonNoMoves))
		var got naradv1.NaradCluster
		Eventually(func() naradv1.MovesStatus { mustGet(nc.Name, &got); return got.Status.Moves }).Should(
			Equal(naradv1.MovesStatus{}))

		By("a pod going unready")
		setPodReady(nc, 2, false)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonPodsNotReady))
		Expect(clusterCondition(nc.Name, naradv1.ConditionProgressing)).To(haveCondition(metav1.ConditionTrue, ReasonPodsStarting))
		setPodReady(nc, 2, true)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionTrue, ReasonClusterReady))

		By("the brokers losing their leader")
		currentFake().Update(func(c *brokertest.Cluster) { c.Leader = "" })
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonNoLeader))
		Eventually(func() string { mustGet(nc.Name, &got); return got.Status.Leader }).Should(BeEmpty())

		By("the brokers not answering")
		currentFake().Update(func(c *brokertest.Cluster) { c.NotReady = true })
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonBrokersUnreachable))
		Eventually(func() metav1.ConditionStatus { return clusterCondition(nc.Name, naradv1.ConditionRebalancing).Status }).Should(
			Equal(metav1.ConditionUnknown))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement(ReasonBrokersUnreachable))
		mustGet(nc.Name, &got)
		Expect(got.Status.Members).To(HaveLen(4), "the last members seen stay in the status")
	})

	It("shows the replication defaults and the brokers' under-replicated partitions as a condition", func() {
		nc := testCluster("ur", withFakeAdmin, func(nc *naradv1.NaradCluster) {
			nc.Spec.TopicDefaults.MinInSyncReplicas = new(int32(2))
		})
		runningCluster(nc, "rev1")
		Eventually(func(g Gomega) {
			var got naradv1.NaradCluster
			mustGet(nc.Name, &got)
			g.Expect(got.Status.Replication).To(HaveValue(Equal(naradv1.ReplicationStatus{
				DefaultReplicationFactor: 3, DefaultMinInSyncReplicas: 2})))
			g.Expect(findCondition(got.Status.Conditions, naradv1.ConditionUnderReplicated)).To(
				haveCondition(metav1.ConditionFalse, ReasonFullyReplicated))
		}).Should(Succeed())

		By("two partitions losing in-sync replicas, one below M")
		currentFake().Update(func(c *brokertest.Cluster) {
			c.Partitions = []client.PartitionReplicas{
				{Topic: "orders", Partition: 0, Replicas: []string{"ur-0", "ur-1", "ur-2"}, Leader: "ur-0", ISR: []string{"ur-0"},
					ReplicationFactor: 3, MinInsyncReplicas: 2, UnderReplicated: true, UnderMinISR: true},
				{Topic: "orders", Partition: 1, Replicas: []string{"ur-1", "ur-2", "ur-0"}, Leader: "ur-1", ISR: []string{"ur-1", "ur-2"},
					ReplicationFactor: 3, MinInsyncReplicas: 2, UnderReplicated: true},
				{Topic: "orders", Partition: 2, Replicas: []string{"ur-2", "ur-0", "ur-1"}, Leader: "ur-2", ISR: []string{"ur-2", "ur-0", "ur-1"},
					ReplicationFactor: 3, MinInsyncReplicas: 2},
			}
		})
		Eventually(func(g Gomega) {
			var got naradv1.NaradCluster
			mustGet(nc.Name, &got)
			g.Expect(got.Status.Replication).To(HaveValue(And(
				HaveField("UnderReplicatedPartitions", int32(2)), HaveField("UnderMinInSyncPartitions", int32(1)))))
			c := findCondition(got.Status.Conditions, naradv1.ConditionUnderReplicated)
			g.Expect(c).To(haveCondition(metav1.ConditionTrue, ReasonPartitionsUnderReplicated))
			g.Expect(c.Message).To(And(ContainSubstring("2 partitions"), ContainSubstring("1 of them")))
		}).Should(Succeed())

		By("the replicas catching up")
		currentFake().Update(func(c *brokertest.Cluster) { c.Partitions = c.Partitions[2:] })
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionUnderReplicated) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonFullyReplicated))

		By("the brokers not answering")
		currentFake().Update(func(c *brokertest.Cluster) { c.NotReady = true })
		Eventually(func() metav1.ConditionStatus {
			return clusterCondition(nc.Name, naradv1.ConditionUnderReplicated).Status
		}).Should(
			Equal(metav1.ConditionUnknown))
	})
})
