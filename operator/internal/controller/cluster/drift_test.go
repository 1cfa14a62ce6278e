package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

var _ = Describe("NaradCluster drift", func() {
	It("undoes hand edits of the Services, the ConfigMap and the StatefulSet", func() {
		nc := testCluster("drift")
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		mustGet(nc.Name, nc)

		By("the client Service's selector")
		var svc corev1.Service
		mutate(naming.ClientService(nc), &svc, func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "someone-else"} })
		Eventually(func() map[string]string {
			mustGet(naming.ClientService(nc), &svc)
			return svc.Spec.Selector
		}).Should(Equal(naming.Selector(nc)))

		By("the headless Service's publishNotReadyAddresses")
		mutate(naming.HeadlessService(nc), &svc, func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = false })
		Eventually(func() bool {
			mustGet(naming.HeadlessService(nc), &svc)
			return svc.Spec.PublishNotReadyAddresses
		}).Should(BeTrue())

		By("the config file")
		var cm corev1.ConfigMap
		mustGet(naming.ConfigMap(nc), &cm)
		want := cm.Data[naming.ConfigFileName]
		mutate(naming.ConfigMap(nc), &cm, func(c *corev1.ConfigMap) { c.Data[naming.ConfigFileName] = "log-level: debug\n" })
		Eventually(func() string {
			mustGet(naming.ConfigMap(nc), &cm)
			return cm.Data[naming.ConfigFileName]
		}).Should(Equal(want))

		By("the broker image")
		mutate(naming.StatefulSet(nc), &sts, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "evil:latest" })
		Eventually(func() string {
			mustGet(naming.StatefulSet(nc), &sts)
			return sts.Spec.Template.Spec.Containers[0].Image
		}).Should(Equal("narad:test"))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("Updated"))

		By("nothing is rewritten on every reconcile")
		versions := func() []string {
			objs := map[string]ctrlclient.Object{naming.StatefulSet(nc): &appsv1.StatefulSet{},
				naming.ConfigMap(nc): &corev1.ConfigMap{}, naming.HeadlessService(nc): &corev1.Service{},
				naming.PodDisruptionBudget(nc): &policyv1.PodDisruptionBudget{}, naming.GeneratedSecret(nc): &corev1.Secret{}}
			var out []string
			for name, obj := range objs {
				mustGet(name, obj)
				out = append(out, name+"@"+obj.GetResourceVersion())
			}
			return out
		}
		rvs := versions()
		before := clusterCondition(nc.Name, naradv1.ConditionReady).LastTransitionTime
		Consistently(versions, 3*statusInterval).Should(ConsistOf(rvs))
		Expect(clusterCondition(nc.Name, naradv1.ConditionReady).LastTransitionTime).To(Equal(before))
	})

	It("rolls the config hash when the broker config changes", func() {
		nc := testCluster("hash")
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		hash := sts.Spec.Template.Annotations[ConfigHashAnnotation]
		Expect(hash).NotTo(BeEmpty())

		retention := int64(0)
		mutate(nc.Name, nc, func(nc *naradv1.NaradCluster) { nc.Spec.Broker.RetentionMs = &retention })
		Eventually(func() string {
			var cm corev1.ConfigMap
			mustGet(naming.ConfigMap(nc), &cm)
			return cm.Data[naming.ConfigFileName]
		}).Should(Equal("default-replication-factor: 3\ntopic-default-retention-ms: 0\n")) // 3 brokers replicate by default
		Eventually(func() string {
			mustGet(naming.StatefulSet(nc), &sts)
			return sts.Spec.Template.Annotations[ConfigHashAnnotation]
		}).ShouldNot(Equal(hash))

		By("a restart request on the cluster reaches the pod template")
		mutate(nc.Name, nc, func(nc *naradv1.NaradCluster) {
			nc.Annotations = map[string]string{naming.RestartedAtAnnotation: "now"}
		})
		Eventually(func() map[string]string {
			mustGet(naming.StatefulSet(nc), &sts)
			return sts.Spec.Template.Annotations
		}).Should(HaveKeyWithValue(naming.RestartedAtAnnotation, "now"))
	})
})
