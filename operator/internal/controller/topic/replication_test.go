package topic_test

import (
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

// patches counts the PATCH calls the fake received for topic.
func patches(f *brokertest.Fake, topic string) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == http.MethodPatch && c.Path == "/v1/topics/"+topic {
			n++
		}
	}
	return n
}

var _ = Describe("Topic replication", func() {
	It("creates the topic with its replication settings and shows R, M and no under-replication", func(ctx SpecContext) {
		create(ctx, newTopic("rep-one", func(t *naradv1.Topic) {
			t.Spec.ReplicationFactor = ptr(int32(1))
			t.Spec.MinInSyncReplicas = ptr(int32(1))
		}))
		Eventually(get(ctx, "rep-one")).Should(And(
			HaveField("Status.ReplicationFactor", int32(1)), HaveField("Status.MinInSyncReplicas", int32(1)),
			HaveField("Status.UnderReplicatedPartitions", int32(0))))
		Eventually(condition(ctx, "rep-one", naradv1.ConditionUnderReplicated)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "FullyReplicated")))
	})

	It("refuses 1 to 2 with the brokers' 409 as a condition, retried at the resync pace only", func(ctx SpecContext) {
		create(ctx, newTopic("rep-grow", nil))
		Eventually(condition(ctx, "rep-grow", naradv1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(update(ctx, "rep-grow", func(t *naradv1.Topic) { t.Spec.ReplicationFactor = ptr(int32(2)) })).To(Succeed())
		Eventually(condition(ctx, "rep-grow", naradv1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "ReplicationChangeRefused"),
			HaveField("Message", ContainSubstring("recreate the topic"))))
		Expect(describe(ctx, "rep-grow")(Default)).To(HaveField("ReplicationFactor", 1))
		Expect(get(ctx, "rep-grow")(Default)).To(HaveField("Status.ReplicationFactor", int32(1)))
	})

	Context("on a replicated cluster (fake brokers)", func() {
		var (
			fake    *brokertest.Fake
			cluster string
			n       int
		)
		BeforeEach(func(ctx SpecContext) {
			n++ // a cluster per spec: the resolver keeps the first URL of a name
			cluster = fmt.Sprintf("replicated-%d", n)
			detail := func(name string, r, m int) client.TopicDetail {
				return client.TopicDetail{Topic: client.Topic{Name: name, Partitions: 3, RetentionMs: 604_800_000,
					VisibilityTimeoutMs: 30_000, MaxInFlightPerPartition: 1024, MaxAckedAheadPerPartition: 1024,
					Role: client.RoleStandalone, ReplicationFactor: r, MinInsyncReplicas: m}, Incarnation: "00112233445566ff"}
			}
			fake = brokertest.New(brokertest.Cluster{
				Leader:  "replicated-0",
				Topics:  []client.TopicDetail{detail("orders-r3", 3, 2), detail("plain", 1, 1)},
				Members: []client.Member{{ID: "replicated-0", Status: "alive", RaftRole: "voter"}},
				Partitions: []client.PartitionReplicas{
					{Topic: "orders-r3", Partition: 0, Replicas: []string{"a", "b", "c"}, Leader: "a", ISR: []string{"a"},
						ReplicationFactor: 3, MinInsyncReplicas: 2, UnderReplicated: true, UnderMinISR: true},
					{Topic: "orders-r3", Partition: 1, Replicas: []string{"b", "c", "a"}, Leader: "b", ISR: []string{"b", "c"},
						ReplicationFactor: 3, MinInsyncReplicas: 2, UnderReplicated: true},
					{Topic: "other", Partition: 0, Replicas: []string{"a", "b"}, Leader: "a", ISR: []string{"a"},
						ReplicationFactor: 2, MinInsyncReplicas: 2, UnderReplicated: true, UnderMinISR: true},
				},
			}, naming.AdminUser, password)
			DeferCleanup(fake.Close)
			_, err := env.AddCluster(ctx, k8s, namespace, cluster, password, fake.URL())
			Expect(err).NotTo(HaveOccurred())
		})
		// onFake is a Topic object of the fake's cluster for the broker topic named topic.
		onFake := func(name, topic string, mutate func(*naradv1.Topic)) *naradv1.Topic {
			return newTopic(name, func(t *naradv1.Topic) {
				t.Spec.ClusterRef.Name = cluster
				t.Spec.Name = topic
				t.Spec.DeletionPolicy = naradv1.DeletionPolicyRetain
				if mutate != nil {
					mutate(t)
				}
			})
		}

		It("counts the topic's under-replicated partitions, then clears the condition once they catch up", func(ctx SpecContext) {
			create(ctx, onFake("count-r3", "orders-r3", nil))
			Eventually(get(ctx, "count-r3")).Should(And(
				HaveField("Status.ReplicationFactor", int32(3)), HaveField("Status.MinInSyncReplicas", int32(2)),
				HaveField("Status.UnderReplicatedPartitions", int32(2)), HaveField("Status.UnderMinInSyncPartitions", int32(1))))
			Eventually(condition(ctx, "count-r3", naradv1.ConditionUnderReplicated)).Should(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "PartitionsUnderReplicated"),
				HaveField("Message", ContainSubstring("2 partitions")), HaveField("Message", ContainSubstring("1 of them"))))
			fake.Update(func(c *brokertest.Cluster) { c.Partitions = c.Partitions[2:] })
			// The under-replicated requeue (10 s, below the suite's resync) notices it.
			Eventually(condition(ctx, "count-r3", naradv1.ConditionUnderReplicated)).Should(
				HaveField("Status", metav1.ConditionFalse))
			Expect(get(ctx, "count-r3")(Default).Status.UnderReplicatedPartitions).To(BeZero())
		})

		It("raises and lowers R and M on the live topic with PATCH", func(ctx SpecContext) {
			create(ctx, onFake("alter-r3", "orders-r3", func(t *naradv1.Topic) { t.Spec.ReplicationFactor = ptr(int32(4)) }))
			Eventually(get(ctx, "alter-r3")).Should(HaveField("Status.ReplicationFactor", int32(4)))
			Expect(update(ctx, "alter-r3", func(t *naradv1.Topic) {
				t.Spec.ReplicationFactor = ptr(int32(2))
				t.Spec.MinInSyncReplicas = ptr(int32(1))
			})).To(Succeed())
			Eventually(get(ctx, "alter-r3")).Should(And(
				HaveField("Status.ReplicationFactor", int32(2)), HaveField("Status.MinInSyncReplicas", int32(1))))
			Expect(fake.State().Topics[0].ReplicationFactor).To(Equal(2))
			Eventually(eventReasons(ctx, "alter-r3")).Should(ContainElement("Altered"))
		})

		It("shows the brokers' refusal of 1 to 3 and does not retry it in a loop", func(ctx SpecContext) {
			create(ctx, onFake("plain-to-r3", "plain", func(t *naradv1.Topic) { t.Spec.ReplicationFactor = ptr(int32(3)) }))
			Eventually(condition(ctx, "plain-to-r3", naradv1.ConditionDegraded)).Should(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "ReplicationChangeRefused"),
				HaveField("Message", ContainSubstring("recreate the topic"))))
			start, at := patches(fake, "plain"), time.Now()
			// One try per resync (2 s here) at most, never a hot loop.
			Consistently(func() bool { return patches(fake, "plain")-start <= int(time.Since(at)/resync)+2 },
				5*time.Second, 500*time.Millisecond).Should(BeTrue())
		})
	})
})
