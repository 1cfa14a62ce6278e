package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

var _ = Describe("NaradCluster finalizer", func() {
	It("holds a deleted cluster while a Topic, FanoutLink or NaradUser references it", func() {
		nc := testCluster("fin")
		mustCreate(nc)
		Eventually(func() []string {
			var got naradv1.NaradCluster
			mustGet(nc.Name, &got)
			return got.Finalizers
		}).Should(ContainElement(naradv1.NaradClusterFinalizer))
		topic := &naradv1.Topic{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: namespace},
			Spec: naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name}, Partitions: 3}}
		other := &naradv1.Topic{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: namespace},
			Spec: naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: "another-cluster"}, Partitions: 3}}
		link := &naradv1.FanoutLink{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: namespace},
			Spec: naradv1.FanoutLinkSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name}, Parent: "orders", Child: "orders-copy"}}
		user := &naradv1.NaradUser{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: namespace},
			Spec: naradv1.NaradUserSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name}}}
		mustCreate(topic)
		mustCreate(other)
		mustCreate(link)
		mustCreate(user)

		Expect(k8sClient.Delete(ctx, nc)).To(Succeed())
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionReady) }).Should(
			Equal("Waiting for Topic orders, FanoutLink copy, NaradUser app to be deleted"))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("WaitingForDependents"))

		Expect(k8sClient.Delete(ctx, topic)).To(Succeed())
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionReady) }).Should(
			Equal("Waiting for FanoutLink copy, NaradUser app to be deleted"))
		Consistently(func() bool { return isAbsent(nc.Name, &naradv1.NaradCluster{}) }, "2s").Should(BeFalse())

		Expect(k8sClient.Delete(ctx, link)).To(Succeed())
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionReady) }).Should(
			Equal("Waiting for NaradUser app to be deleted"))

		Expect(k8sClient.Delete(ctx, user)).To(Succeed())
		Eventually(func() bool { return isAbsent(nc.Name, &naradv1.NaradCluster{}) }).Should(BeTrue(),
			"a Topic of another cluster does not hold this one")
	})
})
