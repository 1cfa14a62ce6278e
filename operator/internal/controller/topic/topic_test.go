package topic_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/controller/testenv"
)

func ptr[T any](v T) *T { return &v }

// newTopic builds a Topic of the suite's cluster; spec.name is left empty (metadata.name).
func newTopic(name string, mutate func(*naradv1.Topic)) *naradv1.Topic {
	t := &naradv1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: clusterName}, Partitions: 3,
			DeletionPolicy: naradv1.DeletionPolicyDelete},
	}
	if mutate != nil {
		mutate(t)
	}
	return t
}

func create(ctx context.Context, t *naradv1.Topic) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, t)).To(Succeed())
}

// get reads a Topic; use it inside Eventually.
func get(ctx context.Context, name string) func(Gomega) *naradv1.Topic {
	return func(g Gomega) *naradv1.Topic {
		var t naradv1.Topic
		g.Expect(k8s.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, &t)).To(Succeed())
		return &t
	}
}

// condition returns a Topic's condition of type typ (nil when absent).
func condition(ctx context.Context, name, typ string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		return apimeta.FindStatusCondition(get(ctx, name)(g).Status.Conditions, typ)
	}
}

// update re-reads a Topic and applies mutate, retrying on conflicts; it returns the API
// server's answer to the last attempt.
func update(ctx context.Context, name string, mutate func(*naradv1.Topic)) error {
	for {
		var t naradv1.Topic
		if err := k8s.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, &t); err != nil {
			return err
		}
		mutate(&t)
		err := k8s.Update(ctx, &t)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// describe asks the real broker for a topic; use it inside Eventually.
func describe(ctx context.Context, name string) func(Gomega) *client.TopicDetail {
	return func(g Gomega) *client.TopicDetail {
		d, err := broker.GetTopic(ctx, name, nil)
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
}

// eventReasons lists the reasons of the events recorded on the Topic named name.
func eventReasons(ctx context.Context, name string) func(Gomega) []string {
	return func(g Gomega) []string {
		var list eventsv1.EventList
		g.Expect(k8s.List(ctx, &list, ctrlclient.InNamespace(namespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Topic" && e.Regarding.Name == name {
				out = append(out, e.Reason)
			}
		}
		return out
	}
}

func schemaOf(doc string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(doc)} }

// gone waits until the Topic object no longer exists.
func gone(ctx context.Context, name string) func() bool {
	return func() bool {
		var t naradv1.Topic
		return apierrors.IsNotFound(k8s.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, &t))
	}
}

var _ = Describe("Topic controller", func() {
	It("creates the broker topic with the spec's fields, writes spec.name back and reports partitions and owners", func(ctx SpecContext) {
		create(ctx, newTopic("orders", func(t *naradv1.Topic) {
			t.Spec.Partitions = 4
			t.Spec.RetentionMs = ptr(int64(7_200_000))
			t.Spec.VisibilityTimeoutMs = ptr(int64(45_000))
			t.Spec.MaxInFlightPerPartition = ptr(int64(64))
			t.Spec.MaxAckedAheadPerPartition = ptr(int64(128))
		}))
		Eventually(describe(ctx, "orders")).Should(And(
			HaveField("Partitions", 4), HaveField("RetentionMs", int64(7_200_000)),
			HaveField("VisibilityTimeoutMs", int64(45_000)), HaveField("MaxInFlightPerPartition", int64(64)),
			HaveField("MaxAckedAheadPerPartition", int64(128))))
		Eventually(get(ctx, "orders")).Should(And(
			HaveField("Spec.Name", "orders"),
			HaveField("ObjectMeta.Finalizers", ContainElement(naradv1.TopicFinalizer)),
			HaveField("Status.Partitions", int32(4)),
			HaveField("Status.Owners", Equal(map[string]int32{nodeID: 4})),
			HaveField("Status.ObservedGeneration", BeNumerically(">=", 1))))
		Eventually(condition(ctx, "orders", naradv1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(eventReasons(ctx, "orders")).Should(ContainElement("Created"))
	})

	It("grows the broker topic's partitions with the spec, and the API server refuses a decrease (CEL)", func(ctx SpecContext) {
		create(ctx, newTopic("grow", nil))
		Eventually(describe(ctx, "grow")).Should(HaveField("Partitions", 3))
		Expect(update(ctx, "grow", func(t *naradv1.Topic) { t.Spec.Partitions = 7 })).To(Succeed())
		Eventually(describe(ctx, "grow")).Should(HaveField("Partitions", 7))
		Eventually(get(ctx, "grow")).Should(HaveField("Status.Partitions", int32(7)))

		err := update(ctx, "grow", func(t *naradv1.Topic) { t.Spec.Partitions = 5 })
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("partitions may not decrease"))
		Consistently(describe(ctx, "grow"), resync*2).Should(HaveField("Partitions", 7))
	})

	It("puts back retention altered by hand on the broker within the resync period", func(ctx SpecContext) {
		create(ctx, newTopic("drift", func(t *naradv1.Topic) { t.Spec.RetentionMs = ptr(int64(10_800_000)) }))
		Eventually(condition(ctx, "drift", naradv1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		_, err := broker.AlterTopic(ctx, "drift", client.AlterTopicRequest{RetentionMs: ptr(int64(0))})
		Expect(err).NotTo(HaveOccurred())
		Eventually(describe(ctx, "drift"), 4*resync).Should(HaveField("RetentionMs", int64(10_800_000)))
		Eventually(eventReasons(ctx, "drift")).Should(ContainElement("Altered"))
	})

	It("creates the broker topic again when it is deleted behind the operator's back", func(ctx SpecContext) {
		create(ctx, newTopic("phoenix", func(t *naradv1.Topic) { t.Spec.Partitions = 5 }))
		Eventually(get(ctx, "phoenix")).Should(HaveField("Status.Partitions", int32(5)))
		first := get(ctx, "phoenix")(Default).Status.Incarnation
		Expect(first).To(MatchRegexp("^[0-9a-f]{16}$"))
		Expect(broker.DeleteTopic(ctx, "phoenix")).To(Succeed())
		Eventually(describe(ctx, "phoenix"), 4*resync).Should(HaveField("Partitions", 5))
		Eventually(eventReasons(ctx, "phoenix")).Should(ContainElement("TopicRecreated"))
		Eventually(get(ctx, "phoenix")).Should(HaveField("Status.Incarnation", And(Not(Equal(first)), MatchRegexp("^[0-9a-f]{16}$"))))
	})

	It("deletes the broker topic with the object under deletionPolicy Delete, and keeps it under Retain", func(ctx SpecContext) {
		create(ctx, newTopic("doomed", nil))
		create(ctx, newTopic("kept", func(t *naradv1.Topic) { t.Spec.DeletionPolicy = naradv1.DeletionPolicyRetain }))
		Eventually(describe(ctx, "doomed")).Should(HaveField("Name", "doomed"))
		Eventually(describe(ctx, "kept")).Should(HaveField("Name", "kept"))
		Eventually(get(ctx, "kept")).Should(HaveField("ObjectMeta.Finalizers", ContainElement(naradv1.TopicFinalizer)))
		Eventually(get(ctx, "doomed")).Should(HaveField("ObjectMeta.Finalizers", ContainElement(naradv1.TopicFinalizer)))

		Expect(k8s.Delete(ctx, newTopic("doomed", nil))).To(Succeed())
		Expect(k8s.Delete(ctx, newTopic("kept", nil))).To(Succeed())
		Eventually(gone(ctx, "doomed")).Should(BeTrue())
		Eventually(gone(ctx, "kept")).Should(BeTrue())
		_, err := broker.GetTopic(ctx, "doomed", nil)
		Expect(client.IsStatus(err, 404)).To(BeTrue(), "doomed still on the broker: %v", err)
		Expect(describe(ctx, "kept")(Default)).To(HaveField("Name", "kept"))
	})

	It("deletes a parent broker topic with the object, detaching its children on purpose", func(ctx SpecContext) {
		create(ctx, newTopic("nest", nil))
		Eventually(describe(ctx, "nest")).Should(HaveField("Name", "nest"))
		_, err := broker.CreateTopic(ctx, client.CreateTopicRequest{Name: "nest-late", Partitions: 3})
		Expect(err).NotTo(HaveOccurred())
		_, err = broker.Attach(ctx, "nest", "nest-late", 60_000)
		Expect(err).NotTo(HaveOccurred())
		Expect(broker.DeleteTopic(ctx, "nest")).To(MatchError(ContainSubstring("detach_children")), "a bare delete of a parent must be refused")

		Expect(k8s.Delete(ctx, newTopic("nest", nil))).To(Succeed())
		Eventually(gone(ctx, "nest")).Should(BeTrue())
		_, err = broker.GetTopic(ctx, "nest", nil)
		Expect(client.IsStatus(err, 404)).To(BeTrue(), "nest still on the broker: %v", err)
		Expect(describe(ctx, "nest-late")(Default)).To(HaveField("Role", "standalone"))
		Eventually(eventReasons(ctx, "nest")).Should(ContainElement("ChildrenDetached"))
	})

	It("adopts a broker topic that already exists and corrects it to the spec", func(ctx SpecContext) {
		_, err := broker.CreateTopic(ctx, client.CreateTopicRequest{Name: "legacy", Partitions: 3})
		Expect(err).NotTo(HaveOccurred())
		create(ctx, newTopic("legacy", func(t *naradv1.Topic) {
			t.Spec.Partitions = 6
			t.Spec.VisibilityTimeoutMs = ptr(int64(5_000))
		}))
		Eventually(describe(ctx, "legacy")).Should(And(HaveField("Partitions", 6), HaveField("VisibilityTimeoutMs", int64(5_000))))
		Eventually(eventReasons(ctx, "legacy")).Should(ContainElements("Adopted", "Altered"))
	})

	It("never shrinks a broker topic with more partitions than the spec: Degraded PartitionsShrinkRefused", func(ctx SpecContext) {
		_, err := broker.CreateTopic(ctx, client.CreateTopicRequest{Name: "wide", Partitions: 9})
		Expect(err).NotTo(HaveOccurred())
		create(ctx, newTopic("wide", func(t *naradv1.Topic) { t.Spec.Partitions = 4 }))
		Eventually(condition(ctx, "wide", naradv1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "PartitionsShrinkRefused")))
		Expect(condition(ctx, "wide", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionFalse))
		Expect(describe(ctx, "wide")(Default)).To(HaveField("Partitions", 9))
		Expect(get(ctx, "wide")(Default)).To(HaveField("Status.Partitions", int32(9)))
	})

	It("reports the backlog: retained records before any consumer, the consumer lag after", func(ctx SpecContext) {
		create(ctx, newTopic("backlog", nil))
		Eventually(condition(ctx, "backlog", naradv1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		p := 1
		for i := range 4 {
			Expect(broker.Produce(ctx, "backlog", fmt.Appendf(nil, "m%d", i), client.ProduceOptions{Partition: &p})).To(Succeed())
		}
		Eventually(get(ctx, "backlog")).Should(HaveField("Status.Backlog", int64(4)))
		msgs, err := broker.Consume(ctx, "backlog", client.ConsumeOptions{Partition: &p, Max: 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).To(HaveLen(1))
		Expect(broker.Ack(ctx, "backlog", msgs[0].ReceiptHandle)).To(Succeed())
		// The owner refreshes narad_consumer_lag_messages every 5 s.
		Eventually(get(ctx, "backlog")).Should(HaveField("Status.Backlog", int64(3)))
	})

	It("registers spec.schema, and shows a schema the brokers refuse as Degraded SchemaRejected", func(ctx SpecContext) {
		create(ctx, newTopic("typed", func(t *naradv1.Topic) {
			t.Spec.Schema = schemaOf(`{"type":"object","properties":{"id":{"type":"string"}}}`)
		}))
		Eventually(condition(ctx, "typed", naradv1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		err := broker.Produce(ctx, "typed", []byte(`"not an object"`), client.ProduceOptions{})
		Expect(client.IsStatus(err, 400)).To(BeTrue(), "schema not enforced: %v", err)
		Expect(broker.Produce(ctx, "typed", []byte(`{"id":"a"}`), client.ProduceOptions{})).To(Succeed())

		// Additive: accepted, and the new property's type is enforced.
		Expect(update(ctx, "typed", func(t *naradv1.Topic) {
			t.Spec.Schema = schemaOf(`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}}}`)
		})).To(Succeed())
		Eventually(func() error {
			return broker.Produce(ctx, "typed", []byte(`{"id":"a","n":"x"}`), client.ProduceOptions{})
		}).Should(Satisfy(func(err error) bool { return client.IsStatus(err, 400) }))
		Eventually(eventReasons(ctx, "typed")).Should(ContainElement("Altered"))

		// Not backward compatible: refused by the brokers.
		Expect(update(ctx, "typed", func(t *naradv1.Topic) { t.Spec.Schema = schemaOf(`{"type":"string"}`) })).To(Succeed())
		Eventually(condition(ctx, "typed", naradv1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "SchemaRejected"),
			HaveField("Message", ContainSubstring("backward compatible"))))
		Expect(condition(ctx, "typed", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionFalse))
		Expect(broker.Produce(ctx, "typed", []byte(`{"id":"b"}`), client.ProduceOptions{})).To(Succeed())
	})

	It("shows an invalid schema at create as Degraded SchemaRejected and creates nothing", func(ctx SpecContext) {
		create(ctx, newTopic("badschema", func(t *naradv1.Topic) { t.Spec.Schema = schemaOf(`{"type":5}`) }))
		Eventually(condition(ctx, "badschema", naradv1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "SchemaRejected")))
		_, err := broker.GetTopic(ctx, "badschema", nil)
		Expect(client.IsStatus(err, 404)).To(BeTrue(), "got %v", err)
	})

	It("waits with Ready False ClusterNotFound for a missing cluster, and deletes without hanging", func(ctx SpecContext) {
		create(ctx, newTopic("orphan", func(t *naradv1.Topic) { t.Spec.ClusterRef.Name = "nowhere" }))
		Eventually(condition(ctx, "orphan", naradv1.ConditionReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "ClusterNotFound")))
		_, err := broker.GetTopic(ctx, "orphan", nil)
		Expect(client.IsStatus(err, 404)).To(BeTrue(), "got %v", err)
		Expect(k8s.Delete(ctx, newTopic("orphan", nil))).To(Succeed())
		Eventually(gone(ctx, "orphan")).Should(BeTrue())
	})

	It("keeps the schema document canonical: equal JSON in another key order is not a new version", func(ctx SpecContext) {
		create(ctx, newTopic("canon", func(t *naradv1.Topic) {
			t.Spec.Schema = schemaOf(`{"type":"object","properties":{"a":{"type":"string"}}}`)
		}))
		Eventually(get(ctx, "canon")).Should(HaveField("ObjectMeta.Annotations", HaveKey("narad.dev/applied-schema")))
		stamp := get(ctx, "canon")(Default).Annotations["narad.dev/applied-schema"]
		Expect(update(ctx, "canon", func(t *naradv1.Topic) {
			t.Spec.Schema = schemaOf(`{"properties":{"a":{"type":"string"}},"type":"object"}`)
			t.Spec.RetentionMs = ptr(int64(3_600_000))
		})).To(Succeed())
		Eventually(describe(ctx, "canon")).Should(HaveField("RetentionMs", int64(3_600_000)))
		Consistently(get(ctx, "canon"), resync).Should(HaveField("ObjectMeta.Annotations", HaveKeyWithValue("narad.dev/applied-schema", stamp)))
	})
})

var _ = Describe("Topic controller without an answering broker", func() {
	It("waits with Ready False BrokersUnreachable, retrying with backoff, and creates nothing", func(ctx SpecContext) {
		_, err := testenv.CreateCluster(ctx, k8s, namespace, "dark", password, testenv.Unreachable)
		Expect(err).NotTo(HaveOccurred())
		create(ctx, newTopic("unlit", func(t *naradv1.Topic) { t.Spec.ClusterRef.Name = "dark" }))
		Eventually(condition(ctx, "unlit", naradv1.ConditionReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "BrokersUnreachable")))
		Expect(condition(ctx, "unlit", naradv1.ConditionProgressing)(Default)).To(HaveField("Status", metav1.ConditionTrue))
		Expect(get(ctx, "unlit")(Default).Finalizers).NotTo(ContainElement(naradv1.TopicFinalizer))
		_, err = broker.GetTopic(ctx, "unlit", nil)
		Expect(client.IsStatus(err, 404)).To(BeTrue(), "got %v", err)
	})
})
