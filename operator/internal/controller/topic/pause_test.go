package topic_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/controller/pause"
)

func annotatePause(value string) func(*naradv1.Topic) {
	return func(t *naradv1.Topic) {
		if value == "" {
			delete(t.Annotations, naradv1.PauseReconcileAnnotation)
			return
		}
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[naradv1.PauseReconcileAnnotation] = value
	}
}

var _ = Describe("Topic pause-reconcile annotation", func() {
	It("creates no broker topic while paused, and applies spec changes only once resumed", func(ctx SpecContext) {
		create(ctx, newTopic("paused", annotatePause("true")))
		Eventually(condition(ctx, "paused", naradv1.ConditionReconcilePaused)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pause.ReasonPaused)))
		// The pass that wrote the condition returned before any broker call.
		_, err := broker.GetTopic(ctx, "paused", nil)
		Expect(client.IsStatus(err, 404)).To(BeTrue(), "got %v", err)
		Expect(get(ctx, "paused")(Default).Finalizers).To(BeEmpty())

		Expect(update(ctx, "paused", annotatePause(""))).To(Succeed())
		Eventually(describe(ctx, "paused")).Should(HaveField("Partitions", 3))
		Eventually(condition(ctx, "paused", naradv1.ConditionReconcilePaused)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pause.ReasonResumed)))

		By("paused again, a partition increase waits")
		Expect(update(ctx, "paused", annotatePause("true"))).To(Succeed())
		Eventually(condition(ctx, "paused", naradv1.ConditionReconcilePaused)).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(update(ctx, "paused", func(t *naradv1.Topic) { t.Spec.Partitions = 6 })).To(Succeed())
		gen := get(ctx, "paused")(Default).Generation
		Eventually(condition(ctx, "paused", naradv1.ConditionReconcilePaused)).Should(HaveField("ObservedGeneration", gen))
		Expect(describe(ctx, "paused")(Default)).To(HaveField("Partitions", 3))

		Expect(update(ctx, "paused", annotatePause(""))).To(Succeed())
		Eventually(describe(ctx, "paused")).Should(HaveField("Partitions", 6))
		Eventually(eventReasons(ctx, "paused")).Should(ContainElements("ReconcilePaused", "ReconcileResumed"))
	})
})
