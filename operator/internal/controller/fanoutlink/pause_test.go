package fanoutlink_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/internal/controller/pause"
)

var _ = Describe("FanoutLink pause-reconcile annotation", func() {
	It("attaches nothing while paused, and attaches once resumed", func(ctx SpecContext) {
		topics(ctx, "paused-parent", "paused-child")
		Expect(k8s.Create(ctx, newLink("paused", "paused-parent", "paused-child", func(fl *naradv1.FanoutLink) {
			fl.Annotations = map[string]string{naradv1.PauseReconcileAnnotation: "true"}
		}))).To(Succeed())
		Eventually(condition(ctx, "paused", naradv1.ConditionReconcilePaused)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pause.ReasonPaused)))
		// The pass that wrote the condition returned before any broker call.
		Expect(childOf(ctx, "paused-parent", "paused-child")(Default)).To(BeNil())

		Eventually(func() error {
			var fl naradv1.FanoutLink
			if err := k8s.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: "paused"}, &fl); err != nil {
				return err
			}
			delete(fl.Annotations, naradv1.PauseReconcileAnnotation)
			return k8s.Update(ctx, &fl)
		}).Should(Succeed())
		Eventually(childOf(ctx, "paused-parent", "paused-child")).ShouldNot(BeNil())
		Eventually(get(ctx, "paused")).Should(HaveField("Status.State", naradv1.FanoutLinkAttached))
		Eventually(condition(ctx, "paused", naradv1.ConditionReconcilePaused)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pause.ReasonResumed)))
	})
})
