package fanoutlink_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

func ptr[T any](v T) *T { return &v }

func newLink(name, parent, child string, mutate func(*naradv1.FanoutLink)) *naradv1.FanoutLink {
	fl := &naradv1.FanoutLink{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: naradv1.FanoutLinkSpec{ClusterRef: naradv1.ClusterReference{Name: clusterName},
			Parent: parent, Child: child},
	}
	if mutate != nil {
		mutate(fl)
	}
	return fl
}

// topics creates standalone broker topics, as an application would.
func topics(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, n := range names {
		_, err := broker.CreateTopic(ctx, client.CreateTopicRequest{Name: n})
		Expect(err).NotTo(HaveOccurred())
	}
}

func get(ctx context.Context, name string) func(Gomega) *naradv1.FanoutLink {
	return func(g Gomega) *naradv1.FanoutLink {
		var fl naradv1.FanoutLink
		g.Expect(k8s.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, &fl)).To(Succeed())
		return &fl
	}
}

func condition(ctx context.Context, name, typ string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		return apimeta.FindStatusCondition(get(ctx, name)(g).Status.Conditions, typ)
	}
}

// childOf returns the broker's listing entry of child under parent (nil when not attached).
func childOf(ctx context.Context, parent, child string) func(Gomega) *client.ChildLink {
	return func(g Gomega) *client.ChildLink {
		kids, err := broker.Children(ctx, parent)
		g.Expect(err).NotTo(HaveOccurred())
		for _, k := range kids.Children {
			if k.Name == child {
				return &k
			}
		}
		return nil
	}
}

func eventReasons(ctx context.Context, name string) func(Gomega) []string {
	return func(g Gomega) []string {
		var list eventsv1.EventList
		g.Expect(k8s.List(ctx, &list, ctrlclient.InNamespace(namespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "FanoutLink" && e.Regarding.Name == name {
				out = append(out, e.Reason)
			}
		}
		return out
	}
}

func gone(ctx context.Context, name string) func() bool {
	return func() bool {
		var fl naradv1.FanoutLink
		return apierrors.IsNotFound(k8s.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, &fl))
	}
}

var _ = Describe("FanoutLink controller", func() {
	It("attaches the child, reports the broker's epoch, and the child receives what the parent gets (lag → 0)", func(ctx SpecContext) {
		topics(ctx, "orders", "orders-audit")
		Expect(k8s.Create(ctx, newLink("audit", "orders", "orders-audit", nil))).To(Succeed())
		Eventually(childOf(ctx, "orders", "orders-audit")).ShouldNot(BeNil())
		epoch := childOf(ctx, "orders", "orders-audit")(Default).AttachEpoch
		Eventually(get(ctx, "audit")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.Epoch", epoch),
			HaveField("ObjectMeta.Finalizers", ContainElement(naradv1.FanoutLinkFinalizer))))
		Expect(condition(ctx, "audit", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionTrue))
		Eventually(eventReasons(ctx, "audit")).Should(ContainElement("Attached"))

		for _, body := range []string{"a", "b", "c"} {
			Expect(broker.Produce(ctx, "orders", []byte(body), client.ProduceOptions{})).To(Succeed())
		}
		got := map[string]bool{}
		Eventually(func(g Gomega) map[string]bool {
			msgs, err := broker.Consume(ctx, "orders-audit", client.ConsumeOptions{Wait: time.Second, Max: 10})
			g.Expect(err).NotTo(HaveOccurred())
			for _, m := range msgs {
				b, err := m.Bytes()
				g.Expect(err).NotTo(HaveOccurred())
				got[string(b)] = true
				g.Expect(broker.Ack(ctx, "orders-audit", m.ReceiptHandle)).To(Succeed())
			}
			return got
		}).Should(Equal(map[string]bool{"a": true, "b": true, "c": true}))
		Eventually(childOf(ctx, "orders", "orders-audit")).Should(And(HaveField("LagMessages", int64(0)), HaveField("LagComplete", true)))
		Eventually(get(ctx, "audit")).Should(HaveField("Status.Lag", int64(0)))
	})

	It("refuses a delay change through the API server (CEL: immutable)", func(ctx SpecContext) {
		topics(ctx, "imm-p", "imm-c")
		Expect(k8s.Create(ctx, newLink("imm", "imm-p", "imm-c", nil))).To(Succeed())
		fl := get(ctx, "imm")(Default)
		base := fl.DeepCopy()
		fl.Spec.DelayMs = 60_000
		// A merge patch carries no resourceVersion: the controller's own writes (finalizer,
		// status) cannot turn the answer into a conflict before validation runs.
		err := k8s.Patch(ctx, fl, ctrlclient.MergeFrom(base))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("delayMs is immutable"))
	})

	It("detaches the child when the object is deleted", func(ctx SpecContext) {
		topics(ctx, "det-p", "det-c")
		Expect(k8s.Create(ctx, newLink("det", "det-p", "det-c", nil))).To(Succeed())
		Eventually(get(ctx, "det")).Should(HaveField("Status.State", naradv1.FanoutLinkAttached))
		Expect(k8s.Delete(ctx, newLink("det", "", "", nil))).To(Succeed())
		Eventually(gone(ctx, "det")).Should(BeTrue())
		Expect(childOf(ctx, "det-p", "det-c")(Default)).To(BeNil())
		c, err := broker.GetTopic(ctx, "det-c", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Role).To(Equal(client.RoleStandalone))
		Eventually(eventReasons(ctx, "det")).Should(ContainElement("Detached"))
	})

	It("attaches again a link detached behind the operator's back, with a new epoch", func(ctx SpecContext) {
		topics(ctx, "re-p", "re-c")
		Expect(k8s.Create(ctx, newLink("re", "re-p", "re-c", nil))).To(Succeed())
		Eventually(get(ctx, "re")).Should(HaveField("Status.State", naradv1.FanoutLinkAttached))
		old := get(ctx, "re")(Default).Status.Epoch
		Expect(broker.Detach(ctx, "re-p", "re-c")).To(Succeed())
		Eventually(childOf(ctx, "re-p", "re-c"), 4*resync).Should(And(Not(BeNil()), HaveField("AttachEpoch", Not(Equal(old)))))
		epoch := childOf(ctx, "re-p", "re-c")(Default).AttachEpoch
		Eventually(get(ctx, "re")).Should(HaveField("Status.Epoch", epoch))
		Eventually(eventReasons(ctx, "re")).Should(ContainElement("Reattached"))
	})

	It("creates the child with createChild, with childPartitions", func(ctx SpecContext) {
		topics(ctx, "mk-p")
		Expect(k8s.Create(ctx, newLink("mk", "mk-p", "mk-c", func(fl *naradv1.FanoutLink) {
			fl.Spec.CreateChild = true
			fl.Spec.ChildPartitions = ptr(int32(5))
		}))).To(Succeed())
		Eventually(func(g Gomega) *client.TopicDetail {
			d, err := broker.GetTopic(ctx, "mk-c", nil)
			g.Expect(err).NotTo(HaveOccurred())
			return d
		}).Should(And(HaveField("Partitions", 5), HaveField("Role", client.RoleChild), HaveField("Parent", "mk-p")))
		Eventually(get(ctx, "mk")).Should(HaveField("Status.State", naradv1.FanoutLinkAttached))
	})

	It("fails a child that is a parent already: Failed, Degraded ChildIsParent", func(ctx SpecContext) {
		topics(ctx, "bad-p", "bad-c", "bad-grandchild")
		_, err := broker.Attach(ctx, "bad-c", "bad-grandchild", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, newLink("bad", "bad-p", "bad-c", nil))).To(Succeed())
		Eventually(get(ctx, "bad")).Should(HaveField("Status.State", naradv1.FanoutLinkFailed))
		Expect(condition(ctx, "bad", naradv1.ConditionDegraded)(Default)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "ChildIsParent")))
		Expect(condition(ctx, "bad", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionFalse))
		Expect(childOf(ctx, "bad-p", "bad-c")(Default)).To(BeNil())
	})

	It("fails a delay the parent's retention does not cover, with the brokers' refusal", func(ctx SpecContext) {
		topics(ctx, "late-p", "late-c") // retention: the 7-day default
		Expect(k8s.Create(ctx, newLink("late", "late-p", "late-c", func(fl *naradv1.FanoutLink) {
			fl.Spec.DelayMs = 7 * 24 * 3_600_000
		}))).To(Succeed())
		Eventually(get(ctx, "late")).Should(HaveField("Status.State", naradv1.FanoutLinkFailed))
		Expect(condition(ctx, "late", naradv1.ConditionDegraded)(Default)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "AttachRejected"),
			HaveField("Message", ContainSubstring("retention"))))
		Eventually(eventReasons(ctx, "late")).Should(ContainElement("AttachFailed"))
	})

	It("waits Pending ParentNotFound for a missing parent and attaches once it exists", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newLink("wait", "wait-p", "wait-c", func(fl *naradv1.FanoutLink) { fl.Spec.CreateChild = true }))).To(Succeed())
		Eventually(get(ctx, "wait")).Should(HaveField("Status.State", naradv1.FanoutLinkPending))
		Expect(condition(ctx, "wait", naradv1.ConditionReady)(Default)).To(HaveField("Reason", "ParentNotFound"))
		topics(ctx, "wait-p")
		Eventually(get(ctx, "wait"), 20*time.Second).Should(HaveField("Status.State", naradv1.FanoutLinkAttached))
		Expect(childOf(ctx, "wait-p", "wait-c")(Default)).NotTo(BeNil())
	})

	It("adopts a link attached by hand with the same delay, keeping the broker's epoch", func(ctx SpecContext) {
		topics(ctx, "adopt-p", "adopt-c")
		_, err := broker.Attach(ctx, "adopt-p", "adopt-c", 0)
		Expect(err).NotTo(HaveOccurred())
		epoch := childOf(ctx, "adopt-p", "adopt-c")(Default).AttachEpoch
		Expect(k8s.Create(ctx, newLink("adopt", "adopt-p", "adopt-c", nil))).To(Succeed())
		Eventually(get(ctx, "adopt")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.Epoch", epoch)))
		Eventually(eventReasons(ctx, "adopt")).Should(ContainElement("Adopted"))
		Consistently(childOf(ctx, "adopt-p", "adopt-c"), resync).Should(HaveField("AttachEpoch", epoch))
	})

	It("fails a link held with another delay and leaves it alone on delete", func(ctx SpecContext) {
		topics(ctx, "other-p", "other-c")
		_, err := broker.Attach(ctx, "other-p", "other-c", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, newLink("other", "other-p", "other-c", func(fl *naradv1.FanoutLink) { fl.Spec.DelayMs = 1000 }))).To(Succeed())
		Eventually(condition(ctx, "other", naradv1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "DelayMismatch")))
		Expect(get(ctx, "other")(Default)).To(HaveField("Status.State", naradv1.FanoutLinkFailed))
		Expect(k8s.Delete(ctx, newLink("other", "", "", nil))).To(Succeed())
		Eventually(gone(ctx, "other")).Should(BeTrue())
		Expect(childOf(ctx, "other-p", "other-c")(Default)).To(HaveField("DelayMs", int64(0)))
	})
})
