package cluster

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// serviceMonitorCRD is the smallest CRD serving monitoring.coreos.com/v1 ServiceMonitor.
func serviceMonitorCRD() *apiextensionsv1.CustomResourceDefinition {
	return minimalCRD("monitoring.coreos.com", "servicemonitors", "ServiceMonitor")
}

// certificateCRD is the smallest CRD serving cert-manager.io/v1 Certificate.
func certificateCRD() *apiextensionsv1.CustomResourceDefinition {
	return minimalCRD("cert-manager.io", "certificates", "Certificate")
}

// installCRD installs crd for the rest of the spec and removes it afterwards.
func installCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	GinkgoHelper()
	_, err := envtest.InstallCRDs(restCfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd.DeepCopy()}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(ctrlclient.IgnoreNotFound(k8sClient.Delete(ctx, crd))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, ctrlclient.ObjectKeyFromObject(crd), crd))
		}).Should(BeTrue())
	})
}

func minimalCRD(group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind),
				Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

func serviceMonitor(nc *naradv1.NaradCluster) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(serviceMonitorGVK)
	err := k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: nc.Namespace, Name: naming.ServiceMonitor(nc)}, u)
	return u, err
}

var _ = Describe("NaradCluster ServiceMonitor", func() {
	It("is skipped with a reason without its CRD, and created once the CRD exists", func() {
		nc := testCluster("mon", func(nc *naradv1.NaradCluster) { nc.Spec.Monitoring.ServiceMonitor = true })
		mustCreate(nc)
		Eventually(func() string {
			return conditionMessage(nc.Name, naradv1.ConditionReady)
		}).Should(ContainSubstring("ServiceMonitor CRD is not installed"))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("AddonUnavailable"))
		awaitObject(naming.StatefulSet(nc), &appsv1.StatefulSet{}) // a missing add-on blocks nothing

		By("installing the ServiceMonitor CRD")
		installCRD(serviceMonitorCRD())

		var sm *unstructured.Unstructured
		Eventually(func() (err error) { sm, err = serviceMonitor(nc); return err }).Should(Succeed())
		mustGet(nc.Name, nc)
		Expect(sm.GetOwnerReferences()).To(HaveLen(1))
		Expect(sm.GetOwnerReferences()[0].UID).To(Equal(nc.UID))
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		want := naming.Selector(nc)
		want[labelServiceRole] = serviceRoleHeadless
		Expect(sel).To(Equal(want))
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		Expect(eps).To(ConsistOf(map[string]any{"port": "http", "path": "/metrics", "scheme": "http"}))
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionReady) }).ShouldNot(
			ContainSubstring("ServiceMonitor"))

		By("the selected Service is the headless one only")
		var headless, clientSvc = naming.HeadlessService(nc), naming.ClientService(nc)
		for name, selected := range map[string]bool{headless: true, clientSvc: false} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("v1")
			u.SetKind("Service")
			mustGet(name, u)
			matches := true
			for k, v := range sel {
				matches = matches && u.GetLabels()[k] == v
			}
			Expect(matches).To(Equal(selected), name)
		}

		By("turning monitoring off removes it")
		mutate(nc.Name, nc, func(nc *naradv1.NaradCluster) { nc.Spec.Monitoring.ServiceMonitor = false })
		Eventually(func() bool { _, err := serviceMonitor(nc); return apierrors.IsNotFound(err) }).Should(BeTrue())
	})
})

var _ = Describe("NaradCluster ServiceMonitor settings", func() {
	endpoints := func(sm *unstructured.Unstructured) []any {
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		return eps
	}

	It("takes its labels, interval and scrape timeout from spec.monitoring and follows their changes", func() {
		installCRD(serviceMonitorCRD())
		nc := testCluster("mon-spec", func(nc *naradv1.NaradCluster) {
			nc.Spec.Monitoring = naradv1.MonitoringSpec{ServiceMonitor: true, Interval: "15s", ScrapeTimeout: "5s",
				Labels: map[string]string{"release": "kube-prometheus-stack", naming.LabelInstance: "not-this-cluster"}}
		})
		mustCreate(nc)
		var sm *unstructured.Unstructured
		Eventually(func() (err error) { sm, err = serviceMonitor(nc); return err }).Should(Succeed())
		Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		for k, v := range naming.Labels(nc) {
			Expect(sm.GetLabels()).To(HaveKeyWithValue(k, v), "the cluster's own labels win")
		}
		Expect(endpoints(sm)).To(ConsistOf(map[string]any{"port": "http", "path": "/metrics", "scheme": "http",
			"interval": "15s", "scrapeTimeout": "5s"}))

		By("changing the labels and interval, and dropping the scrape timeout")
		mutate(nc.Name, nc, func(nc *naradv1.NaradCluster) {
			nc.Spec.Monitoring.Labels = map[string]string{"release": "prom"}
			nc.Spec.Monitoring.Interval, nc.Spec.Monitoring.ScrapeTimeout = "1m", ""
		})
		Eventually(func(g Gomega) {
			sm, err := serviceMonitor(nc)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prom"))
			g.Expect(endpoints(sm)).To(ConsistOf(map[string]any{"port": "http", "path": "/metrics", "scheme": "http",
				"interval": "1m"}))
		}).Should(Succeed())

		By("a label the API server would refuse is reported on Ready, not applied")
		mutate(nc.Name, nc, func(nc *naradv1.NaradCluster) {
			nc.Spec.Monitoring.Labels = map[string]string{"team name": "queues"}
		})
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionReady) }).Should(
			ContainSubstring(`spec.monitoring.labels: key "team name"`))
		sm, err := serviceMonitor(nc)
		Expect(err).NotTo(HaveOccurred())
		Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prom"), "the last valid ServiceMonitor stays")
	})

	It("refuses a scrape timeout above the interval and durations Prometheus would not parse", func() {
		for i, mon := range []naradv1.MonitoringSpec{
			{ServiceMonitor: true, Interval: "10s", ScrapeTimeout: "30s"},
			{ServiceMonitor: true, Interval: "30 seconds"},
			{ServiceMonitor: true, ScrapeTimeout: "1.5s"},
		} {
			nc := testCluster(fmt.Sprintf("mon-bad-%d", i), func(nc *naradv1.NaradCluster) { nc.Spec.Monitoring = mon })
			err := k8sClient.Create(ctx, nc)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%+v: %v", mon, err)
		}
		mustCreate(testCluster("mon-ok", func(nc *naradv1.NaradCluster) {
			nc.Spec.Monitoring = naradv1.MonitoringSpec{Interval: "1m30s", ScrapeTimeout: "90s"}
		}))
	})
})

var _ = Describe("NaradCluster cert-manager Certificate", func() {
	It("requests a certificate for every pod and Service name, and starts the pods once it is issued", func() {
		installCRD(certificateCRD())
		nc := testCluster("certs", func(nc *naradv1.NaradCluster) {
			nc.Spec.TLS = &naradv1.TLSSpec{CertManager: &naradv1.CertManagerTLS{
				IssuerRef: naradv1.IssuerReference{Name: "narad-ca", Kind: "ClusterIssuer"}}}
		})
		mustCreate(nc)
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(certificateGVK)
		awaitObject(naming.Certificate(nc), cert)
		mustGet(nc.Name, nc)
		Expect(cert.GetOwnerReferences()).To(HaveLen(1))
		Expect(cert.GetOwnerReferences()[0].UID).To(Equal(nc.UID))
		spec, _, _ := unstructured.NestedMap(cert.Object, "spec")
		Expect(spec).To(HaveKeyWithValue("secretName", naming.TLSSecret(nc)))
		Expect(spec).To(HaveKeyWithValue("issuerRef", map[string]any{"name": "narad-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}))
		names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		ns := nc.Namespace
		Expect(names).To(ContainElements("*.certs-headless."+ns+".svc", "certs-headless."+ns+".svc", "certs."+ns+".svc", "certs"))
		Expect(names).To(ContainElement(MatchRegexp(`^\*\.`)), "a wildcard covers every pod host, present and future")
		Expect(spec["usages"]).To(ContainElements("server auth", "client auth"))

		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonCertificatePending))
		Expect(isAbsent(naming.StatefulSet(nc), &appsv1.StatefulSet{})).To(BeTrue())

		By("cert-manager issuing the certificate")
		makeSecret(naming.TLSSecret(nc), map[string]string{"tls.crt": "c", "tls.key": "k", "ca.crt": "ca"})
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", naming.TLSSecret(nc))))
	})
})
