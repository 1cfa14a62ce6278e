package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/internal/controller/pause"
	"narad.dev/operator/naming"
)

func setPause(name, value string) {
	GinkgoHelper()
	mutate(name, &naradv1.NaradCluster{}, func(c *naradv1.NaradCluster) {
		if value == "" {
			delete(c.Annotations, naradv1.PauseReconcileAnnotation)
			return
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[naradv1.PauseReconcileAnnotation] = value
	})
}

var _ = Describe("NaradCluster pause-reconcile annotation", func() {
	It("creates nothing for a cluster created paused, until the annotation goes", func() {
		nc := testCluster("born-paused", func(nc *naradv1.NaradCluster) {
			nc.Annotations = map[string]string{naradv1.PauseReconcileAnnotation: "true"}
		})
		mustCreate(nc)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReconcilePaused) }).
			Should(haveCondition(metav1.ConditionTrue, pause.ReasonPaused))
		// The pass that wrote the condition is the only one: it returned before anything else.
		Expect(isAbsent(naming.StatefulSet(nc), &appsv1.StatefulSet{})).To(BeTrue())
		mustGet(nc.Name, nc)
		Expect(nc.Finalizers).To(BeEmpty())

		setPause(nc.Name, "")
		awaitObject(naming.StatefulSet(nc), &appsv1.StatefulSet{})
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReconcilePaused) }).
			Should(haveCondition(metav1.ConditionFalse, pause.ReasonResumed))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElements("ReconcilePaused", "ReconcileResumed"))
	})

	It("leaves a running cluster's StatefulSet alone while paused, and applies the spec once resumed", func() {
		nc := testCluster("paused")
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)

		setPause(nc.Name, "true")
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReconcilePaused) }).
			Should(haveCondition(metav1.ConditionTrue, pause.ReasonPaused))
		mutate(nc.Name, &naradv1.NaradCluster{}, func(c *naradv1.NaradCluster) { c.Spec.Image = "narad:other" })
		mustGet(nc.Name, nc)
		// The paused pass stamps the generation it saw on the condition.
		Eventually(func() int64 { return clusterCondition(nc.Name, naradv1.ConditionReconcilePaused).ObservedGeneration }).
			Should(Equal(nc.Generation))
		mustGet(naming.StatefulSet(nc), &sts)
		Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("narad:test"))

		By(`any value but "true" reconciles`)
		setPause(nc.Name, "false")
		Eventually(func() string {
			mustGet(naming.StatefulSet(nc), &sts)
			return sts.Spec.Template.Spec.Containers[0].Image
		}).Should(Equal("narad:other"))
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReconcilePaused) }).
			Should(haveCondition(metav1.ConditionFalse, pause.ReasonResumed))
	})
})
