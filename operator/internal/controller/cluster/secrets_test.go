package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

var _ = Describe("NaradCluster secrets", func() {
	It("generates the cluster secret and admin password once and never again", func() {
		nc := testCluster("gen")
		mustCreate(nc)
		var sec corev1.Secret
		awaitObject(naming.GeneratedSecret(nc), &sec)
		mustGet(nc.Name, nc)
		expectOwned(nc, &sec)
		Expect(string(sec.Data[naradv1.ClusterSecretKey])).To(MatchRegexp("^[0-9a-f]{64}$"))
		Expect(string(sec.Data[naradv1.AdminPasswordKey])).To(MatchRegexp("^[A-Za-z0-9_-]{32}$"))
		first := sec.DeepCopy()

		By("reconciling a spec change, which rewrites the config")
		mutate(nc.Name, nc, func(nc *naradv1.NaradCluster) { nc.Spec.Broker.LogLevel = "debug" })
		Eventually(func() string {
			var cm corev1.ConfigMap
			mustGet(naming.ConfigMap(nc), &cm)
			return cm.Data[naming.ConfigFileName]
		}).Should(ContainSubstring("log-level"))
		Eventually(func() int64 {
			var got naradv1.NaradCluster
			mustGet(nc.Name, &got)
			return got.Status.ObservedGeneration
		}).Should(Equal(nc.Generation))
		mustGet(naming.GeneratedSecret(nc), &sec)
		Expect(sec.Data).To(Equal(first.Data))
		Expect(sec.ResourceVersion).To(Equal(first.ResourceVersion))

		By("a generated Secret that lost a key gets only that key back")
		mutate(naming.GeneratedSecret(nc), &sec, func(s *corev1.Secret) { delete(s.Data, naradv1.AdminPasswordKey) })
		Eventually(func() []byte {
			mustGet(naming.GeneratedSecret(nc), &sec)
			return sec.Data[naradv1.AdminPasswordKey]
		}).ShouldNot(BeEmpty())
		Expect(sec.Data[naradv1.ClusterSecretKey]).To(Equal(first.Data[naradv1.ClusterSecretKey]))
	})

	It("uses the user's Secrets without touching them or generating any", func() {
		admin := makeSecret("my-admin", map[string]string{naradv1.AdminPasswordKey: "pw"})
		cluster := makeSecret("my-cluster", map[string]string{naradv1.ClusterSecretKey: "cs"})
		nc := testCluster("user", func(nc *naradv1.NaradCluster) {
			nc.Spec.Security = naradv1.SecuritySpec{
				AdminSecretRef:   &naradv1.SecretReference{Name: "my-admin"},
				ClusterSecretRef: &naradv1.SecretReference{Name: "my-cluster"},
			}
		})
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		vols := map[string]string{}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				vols[v.Name] = v.Secret.SecretName
			}
		}
		Expect(vols).To(Equal(map[string]string{"admin-secret": "my-admin", "cluster-secret": "my-cluster"}))
		Expect(isAbsent(naming.GeneratedSecret(nc), &corev1.Secret{})).To(BeTrue())
		for _, s := range []*corev1.Secret{admin, cluster} {
			var now corev1.Secret
			mustGet(s.Name, &now)
			Expect(now.ResourceVersion).To(Equal(s.ResourceVersion))
			Expect(now.OwnerReferences).To(BeEmpty())
		}

		By("a changed user Secret rolls the config hash")
		hash := sts.Spec.Template.Annotations[ConfigHashAnnotation]
		admin.StringData = map[string]string{naradv1.AdminPasswordKey: "pw2"}
		Expect(k8sClient.Update(ctx, admin)).To(Succeed())
		Eventually(func() string {
			mustGet(naming.StatefulSet(nc), &sts)
			return sts.Spec.Template.Annotations[ConfigHashAnnotation]
		}).ShouldNot(Equal(hash))

		By("a user Secret without its key stops the operator from touching the StatefulSet")
		cluster.StringData, cluster.Data = nil, map[string][]byte{"other": []byte("x")}
		Expect(k8sClient.Update(ctx, cluster)).To(Succeed())
		Eventually(func() string {
			c := clusterCondition(nc.Name, naradv1.ConditionReady)
			return c.Reason + ": " + c.Message
		}).Should(Equal(ReasonSecretMissing + ": Secret my-cluster lacks key(s) cluster-secret"))
		var c corev1.Secret
		mustGet("my-cluster", &c)
		Expect(c.Data).To(Equal(map[string][]byte{"other": []byte("x")}), "the operator never writes a user Secret")
	})
})
