package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
	"narad.dev/operator/release"
)

func stsImage(nc *naradv1.NaradCluster) string {
	var sts appsv1.StatefulSet
	mustGet(naming.StatefulSet(nc), &sts)
	return sts.Spec.Template.Spec.Containers[0].Image
}

var _ = Describe("NaradCluster broker version skew", func() {
	It("shows the version the pods run, and refuses a broker release the operator does not manage", func() {
		nc := testCluster("skew", withFakeAdmin)
		runningCluster(nc, "rev-1")
		Eventually(func() string { mustGet(nc.Name, nc); return nc.Status.Version }).Should(Equal("test"))

		By("a broker newer than the operator: upgrade the operator first")
		mutate(nc.Name, &naradv1.NaradCluster{}, func(c *naradv1.NaradCluster) { c.Spec.Image = "registry.example/narad:0.2.0" })
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionFalse, release.ReasonNewerThanOper))
		Expect(conditionMessage(nc.Name, naradv1.ConditionReady)).To(ContainSubstring("upgrade the operator first"))
		Expect(stsImage(nc)).To(Equal("narad:test"), "the StatefulSet is not written while the version is refused")
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement(release.ReasonNewerThanOper))

		By("the operator's own release is applied")
		mutate(nc.Name, &naradv1.NaradCluster{}, func(c *naradv1.NaradCluster) { c.Spec.Image = "registry.example/narad:" + release.Version })
		Eventually(func() string { return stsImage(nc) }).Should(Equal("registry.example/narad:" + release.Version))
		mustGet(nc.Name, nc)
		Expect(nc.Status.Version).To(Equal("test"), "the pods still run the old image until they are rolled")
	})

	It("does not create a cluster whose broker release is too new", func() {
		nc := testCluster("skew-new", func(nc *naradv1.NaradCluster) { nc.Spec.Image = "narad:v1.0.0" })
		mustCreate(nc)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionFalse, release.ReasonNewerThanOper))
		Expect(isAbsent(naming.StatefulSet(nc), &appsv1.StatefulSet{})).To(BeTrue())
	})
})
