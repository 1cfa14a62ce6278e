package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// expectOwned checks the cluster's labels and controller reference on obj.
func expectOwned(nc *naradv1.NaradCluster, obj ctrlclient.Object) {
	GinkgoHelper()
	Expect(obj.GetLabels()).To(HaveKeyWithValue(naming.LabelInstance, nc.Name))
	Expect(obj.GetLabels()).To(HaveKeyWithValue(naming.LabelName, naming.AppName))
	Expect(obj.GetLabels()).To(HaveKeyWithValue(naming.LabelManagedBy, naming.ManagedBy))
	refs := obj.GetOwnerReferences()
	Expect(refs).To(HaveLen(1))
	Expect(refs[0].Kind).To(Equal("NaradCluster"))
	Expect(refs[0].Name).To(Equal(nc.Name))
	Expect(refs[0].UID).To(Equal(nc.UID))
	Expect(refs[0].Controller).To(HaveValue(BeTrue()))
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

var _ = Describe("NaradCluster owned objects", func() {
	It("builds the StatefulSet by the pod contract", func() {
		class := "local-path"
		size := resource.MustParse("5Gi")
		retention := int64(3600000)
		nc := testCluster("shape", func(nc *naradv1.NaradCluster) {
			nc.Annotations = map[string]string{naming.RestartedAtAnnotation: "2026-01-02T03:04:05Z"}
			nc.Spec.Replicas, nc.Spec.InitialClusterSize = 4, 3
			nc.Spec.Image = "example.com/narad:0.1.3"
			nc.Spec.ImagePullPolicy = corev1.PullIfNotPresent
			nc.Spec.Storage = naradv1.StorageSpec{StorageClassName: &class, Size: &size}
			nc.Spec.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}
			nc.Spec.Scheduling = naradv1.SchedulingSpec{
				NodeSelector:      map[string]string{"disk": "ssd"},
				PriorityClassName: "narad-critical",
				Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "narad", Effect: corev1.TaintEffectNoSchedule}},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1,
					TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10,
						PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}}}}},
			}
			nc.Spec.Broker = naradv1.BrokerConfig{RetentionMs: &retention, LogLevel: "debug",
				ExtraArgs: []string{"--heartbeat-interval=1s"}}
		})
		mustCreate(nc)

		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		mustGet(nc.Name, nc)
		expectOwned(nc, &sts)
		Expect(sts.Spec.Replicas).To(HaveValue(Equal(int32(4))))
		Expect(sts.Spec.ServiceName).To(Equal(naming.HeadlessService(nc)))
		Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
		Expect(sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))
		Expect(sts.Spec.Selector.MatchLabels).To(Equal(naming.Selector(nc)))
		Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy).To(Equal(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		}))

		By("the claim template")
		Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
		vct := sts.Spec.VolumeClaimTemplates[0]
		Expect(vct.Name).To(Equal(naming.DataVolume))
		Expect(vct.Spec.StorageClassName).To(HaveValue(Equal(class)))
		Expect(vct.Spec.AccessModes).To(ConsistOf(corev1.ReadWriteOnce))
		Expect(vct.Spec.Resources.Requests.Storage().String()).To(Equal("5Gi"))

		By("the pod template")
		tpl := sts.Spec.Template
		Expect(tpl.Labels).To(Equal(naming.Labels(nc)))
		Expect(tpl.Annotations).To(HaveKeyWithValue(naming.RestartedAtAnnotation, "2026-01-02T03:04:05Z"))
		Expect(tpl.Annotations[ConfigHashAnnotation]).To(MatchRegexp("^[0-9a-f]{16}$"))
		ps := tpl.Spec
		Expect(ps.NodeSelector).To(Equal(map[string]string{"disk": "ssd"}))
		Expect(ps.PriorityClassName).To(Equal("narad-critical"))
		Expect(ps.Tolerations).To(Equal(nc.Spec.Scheduling.Tolerations))
		Expect(ps.Affinity).To(Equal(nc.Spec.Scheduling.Affinity))
		Expect(ps.TopologySpreadConstraints).To(HaveLen(1))
		Expect(ps.TopologySpreadConstraints[0].LabelSelector.MatchLabels).To(Equal(naming.Selector(nc)))
		Expect(ps.Containers).To(HaveLen(1))
		c := ps.Containers[0]
		Expect(c.Name).To(Equal(naming.ContainerName))
		Expect(c.Image).To(Equal("example.com/narad:0.1.3"))
		Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
		Expect(c.Command).To(Equal([]string{"narad", "serve"}))
		Expect(c.Args).To(Equal([]string{"--heartbeat-interval=1s"}))
		Expect(c.Resources).To(Equal(nc.Spec.Resources))
		Expect(c.Ports).To(ConsistOf(
			corev1.ContainerPort{Name: "http", ContainerPort: 7942, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "cluster", ContainerPort: 7943, Protocol: corev1.ProtocolTCP}))

		By("the environment, in the contract's order")
		Expect(envNames(c.Env)).To(Equal([]string{"POD_NAME", "POD_NAMESPACE", "NARAD_NODE_ID", "NARAD_HTTP_ADDR",
			"NARAD_CLUSTER_ADDR", "NARAD_ADVERTISE_ADDR", "NARAD_INITIAL_MEMBERS", "NARAD_JOIN", "NARAD_DATA_DIR",
			"NARAD_CONFIG", "NARAD_CLUSTER_SECRET_FILE", "NARAD_ADMIN_PASSWORD_FILE", "GOMEMLIMIT", "NARAD_RACK_FILE"}))
		Expect(c.Env[0].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.name"))
		Expect(c.Env[1].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.namespace"))
		ns := nc.Namespace
		Expect(envMap(c.Env)).To(Equal(map[string]string{
			"POD_NAME": "", "POD_NAMESPACE": "",
			"NARAD_NODE_ID":         "$(POD_NAME)",
			"NARAD_HTTP_ADDR":       ":7942",
			"NARAD_CLUSTER_ADDR":    ":7943",
			"NARAD_ADVERTISE_ADDR":  "$(POD_NAME).shape-headless.$(POD_NAMESPACE).svc:7943",
			"NARAD_INITIAL_MEMBERS": "shape-0,shape-1,shape-2",
			"NARAD_JOIN": "shape-0.shape-headless." + ns + ".svc:7943,shape-1.shape-headless." + ns +
				".svc:7943,shape-2.shape-headless." + ns + ".svc:7943",
			"NARAD_DATA_DIR":            "/var/lib/narad/data",
			"NARAD_CONFIG":              "/etc/narad/config/narad.yaml",
			"NARAD_CLUSTER_SECRET_FILE": "/etc/narad/cluster-secret/cluster-secret",
			"NARAD_ADMIN_PASSWORD_FILE": "/etc/narad/admin-secret/admin-password",
			"GOMEMLIMIT":                "966367620", // 90 % of the 1Gi memory limit
			"NARAD_RACK_FILE":           "/var/run/narad-rack/rack",
		}))

		By("the volumes")
		Expect(c.VolumeMounts).To(ConsistOf(
			corev1.VolumeMount{Name: "data", MountPath: "/var/lib/narad"},
			corev1.VolumeMount{Name: "config", MountPath: "/etc/narad/config", ReadOnly: true},
			corev1.VolumeMount{Name: "cluster-secret", MountPath: "/etc/narad/cluster-secret", ReadOnly: true},
			corev1.VolumeMount{Name: "admin-secret", MountPath: "/etc/narad/admin-secret", ReadOnly: true},
			corev1.VolumeMount{Name: "rack", MountPath: "/var/run/narad-rack", ReadOnly: true}))
		vols := map[string]corev1.Volume{}
		for _, v := range ps.Volumes {
			vols[v.Name] = v
		}
		Expect(vols).To(HaveLen(4))
		Expect(vols["rack"].EmptyDir).NotTo(BeNil())
		Expect(vols["config"].ConfigMap.Name).To(Equal(naming.ConfigMap(nc)))
		Expect(vols["config"].ConfigMap.Items).To(Equal([]corev1.KeyToPath{{Key: "narad.yaml", Path: "narad.yaml"}}))
		Expect(vols["cluster-secret"].Secret.SecretName).To(Equal(naming.GeneratedSecret(nc)))
		Expect(vols["cluster-secret"].Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "cluster-secret", Path: "cluster-secret"}}))
		Expect(vols["admin-secret"].Secret.SecretName).To(Equal(naming.GeneratedSecret(nc)))
		Expect(vols["admin-secret"].Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "admin-password", Path: "admin-password"}}))

		By("the rack init container and the ServiceAccount that may read Nodes")
		Expect(ps.ServiceAccountName).To(Equal("shape-broker"))
		Expect(ps.InitContainers).To(HaveLen(1))
		ic := ps.InitContainers[0]
		Expect(ic.Name).To(Equal("rack"))
		Expect(ic.Image).To(Equal(rackImage))
		Expect(ic.Command).To(Equal([]string{"/manager", "rack", "--file=/var/run/narad-rack/rack"}))
		Expect(ic.Env).To(HaveLen(1))
		Expect(ic.Env[0].Name).To(Equal("NODE_NAME"))
		Expect(ic.Env[0].ValueFrom.FieldRef.FieldPath).To(Equal("spec.nodeName"))
		Expect(ic.VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "rack", MountPath: "/var/run/narad-rack"}}))
		Expect(ic.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(ic.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(ic.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		var sa corev1.ServiceAccount
		awaitObject("shape-broker", &sa)
		expectOwned(nc, &sa)
		var binding rbacv1.ClusterRoleBinding
		Eventually(func() error {
			return k8sClient.Get(ctx, ctrlclient.ObjectKey{Name: "narad-rack." + nc.Namespace + ".shape"}, &binding)
		}).Should(Succeed())
		Expect(binding.RoleRef.Name).To(Equal(DefaultRackClusterRole))
		Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "shape-broker", Namespace: nc.Namespace}}))
		// The rack ClusterRole comes with the operator's install (chart or config/rbac), which
		// removes it again; the operator creates no ClusterRole that would outlive it.
		var roles rbacv1.ClusterRoleList
		Expect(k8sClient.List(ctx, &roles, ctrlclient.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy})).To(Succeed())
		Expect(roles.Items).To(BeEmpty())

		By("the probes and the preStop hook")
		Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			Expect(p.HTTPGet.Port).To(Equal(intstr.FromString("http")))
			Expect(p.HTTPGet.Scheme).To(Equal(corev1.URISchemeHTTP))
		}
		Expect(c.Lifecycle.PreStop.Sleep).To(Equal(&corev1.SleepAction{Seconds: 5}))
		Expect(ps.SecurityContext.FSGroup).To(HaveValue(BeEquivalentTo(65532)))
		Expect(ps.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(ps.TerminationGracePeriodSeconds).To(HaveValue(BeNumerically(">", 5)))

		By("the status of a cluster whose pods do not exist yet")
		Eventually(func(g Gomega) {
			var got naradv1.NaradCluster
			g.Expect(k8sClient.Get(ctx, ctrlclient.ObjectKeyFromObject(nc), &got)).To(Succeed())
			g.Expect(got.Finalizers).To(ContainElement(naradv1.NaradClusterFinalizer))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Replicas).To(Equal(int32(4)))
			g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/instance=shape,app.kubernetes.io/name=narad"))
			ready := findCondition(got.Status.Conditions, naradv1.ConditionReady)
			g.Expect(ready).To(haveCondition(metav1.ConditionFalse, ReasonPodsNotReady))
			g.Expect(ready.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(findCondition(got.Status.Conditions, naradv1.ConditionProgressing)).To(
				haveCondition(metav1.ConditionTrue, ReasonPodsStarting))
		}).Should(Succeed())
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("Created"))
	})

	It("replaces a rack binding made for another ClusterRole (its roleRef cannot change)", func() {
		nc := testCluster("rebind")
		old := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "narad-rack." + nc.Namespace + ".rebind"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rebind-broker", Namespace: nc.Namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "narad-broker-rack"},
		}
		mustCreate(old)
		mustCreate(nc)
		Eventually(func(g Gomega) {
			var b rbacv1.ClusterRoleBinding
			g.Expect(k8sClient.Get(ctx, ctrlclient.ObjectKeyFromObject(old), &b)).To(Succeed())
			g.Expect(b.RoleRef.Name).To(Equal(DefaultRackClusterRole))
		}).Should(Succeed())
	})

	It("spreads the pods over nodes and zones by default, and leaves the rack to extraArgs that set it", func() {
		nc := testCluster("spread", func(nc *naradv1.NaradCluster) {
			nc.Spec.Broker.ExtraArgs = []string{"--rack=dc1"}
		})
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		ps := sts.Spec.Template.Spec
		Expect(ps.Affinity).To(Equal(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: naming.Selector(nc)}}}}}}))
		Expect(ps.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{{MaxSkew: 1,
			TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: naming.Selector(nc)}}}))
		Expect(ps.InitContainers).To(BeEmpty())
		Expect(envNames(ps.Containers[0].Env)).NotTo(ContainElement("NARAD_RACK_FILE"))

		By("deleting the cluster removes its ClusterRoleBinding")
		nc2 := testCluster("racked", withFakeAdmin)
		mustCreate(nc2)
		key := ctrlclient.ObjectKey{Name: "narad-rack." + nc2.Namespace + ".racked"}
		Eventually(func() error { return k8sClient.Get(ctx, key, &rbacv1.ClusterRoleBinding{}) }).Should(Succeed())
		Expect(k8sClient.Delete(ctx, nc2)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key, &rbacv1.ClusterRoleBinding{}))
		}).Should(BeTrue())
	})

	It("creates the config, the Services and the PodDisruptionBudget", func() {
		wait := metav1.Duration{Duration: 5e9}
		parts, maxParts := int32(6), int32(60)
		nc := testCluster("svc", func(nc *naradv1.NaradCluster) {
			nc.Spec.Service = naradv1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Annotations: map[string]string{"lb.example.com/internal": "true"}}
			nc.Spec.Broker = naradv1.BrokerConfig{MaxConsumeWait: &wait, DefaultPartitions: &parts, MaxPartitions: &maxParts,
				LogLevel: "warn"}
		})
		mustCreate(nc)
		var headless, clientSvc corev1.Service
		var cm corev1.ConfigMap
		var pdb policyv1.PodDisruptionBudget
		awaitObject(naming.HeadlessService(nc), &headless)
		awaitObject(naming.ClientService(nc), &clientSvc)
		awaitObject(naming.ConfigMap(nc), &cm)
		awaitObject(naming.PodDisruptionBudget(nc), &pdb)
		mustGet(nc.Name, nc)

		expectOwned(nc, &headless)
		Expect(headless.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(headless.Spec.PublishNotReadyAddresses).To(BeTrue())
		Expect(headless.Spec.Selector).To(Equal(naming.Selector(nc)))
		Expect(headless.Spec.Ports).To(ConsistOf(
			corev1.ServicePort{Name: "http", Port: 7942, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "cluster", Port: 7943, TargetPort: intstr.FromString("cluster"), Protocol: corev1.ProtocolTCP}))

		expectOwned(nc, &clientSvc)
		Expect(clientSvc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
		Expect(clientSvc.Annotations).To(HaveKeyWithValue("lb.example.com/internal", "true"))
		Expect(clientSvc.Spec.Selector).To(Equal(naming.Selector(nc)))
		Expect(clientSvc.Spec.Ports).To(HaveLen(1))
		Expect(clientSvc.Spec.Ports[0].Name).To(Equal("http"))
		Expect(clientSvc.Spec.Ports[0].Port).To(Equal(int32(7942)))

		expectOwned(nc, &pdb)
		Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(naming.Selector(nc)))

		expectOwned(nc, &cm)
		Expect(cm.Data).To(Equal(map[string]string{"narad.yaml": "default-replication-factor: 3\nlog-level: \"warn\"\nmax-consume-wait: \"5s\"\n" +
			"topic-default-partitions: 6\ntopic-max-partitions: 60\n"}))
	})

	It("serves TLS from the named Secret, and waits for a Secret that is missing", func() {
		nc := testCluster("tls", func(nc *naradv1.NaradCluster) {
			nc.Spec.TLS = &naradv1.TLSSpec{SecretName: "tls-certs"}
		})
		mustCreate(nc)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonSecretMissing))
		Expect(conditionMessage(nc.Name, naradv1.ConditionReady)).To(ContainSubstring("tls-certs"))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement(ReasonSecretMissing))
		Expect(isAbsent(naming.StatefulSet(nc), &appsv1.StatefulSet{})).To(BeTrue(), "no StatefulSet without its Secrets")

		By("a Secret lacking ca.crt still blocks")
		sec := makeSecret("tls-certs", map[string]string{"tls.crt": "c", "tls.key": "k"})
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionReady) }).Should(ContainSubstring("ca.crt"))
		Expect(isAbsent(naming.StatefulSet(nc), &appsv1.StatefulSet{})).To(BeTrue())

		sec.StringData = map[string]string{"ca.crt": "ca"}
		Expect(k8sClient.Update(ctx, sec)).To(Succeed())
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		c := sts.Spec.Template.Spec.Containers[0]
		env := envMap(c.Env)
		Expect(env).To(HaveKeyWithValue("NARAD_TLS_CERT", "/etc/narad/tls/tls.crt"))
		Expect(env).To(HaveKeyWithValue("NARAD_TLS_KEY", "/etc/narad/tls/tls.key"))
		Expect(env).To(HaveKeyWithValue("NARAD_CLUSTER_TLS_CA", "/etc/narad/tls/ca.crt"))
		Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "tls", MountPath: "/etc/narad/tls", ReadOnly: true}))
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "tls-certs")))
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			Expect(p.HTTPGet.Scheme).To(Equal(corev1.URISchemeHTTPS))
		}
	})

	It("reports a missing cert-manager instead of creating pods that never get a certificate", func() {
		nc := testCluster("cm", func(nc *naradv1.NaradCluster) {
			nc.Spec.TLS = &naradv1.TLSSpec{CertManager: &naradv1.CertManagerTLS{IssuerRef: naradv1.IssuerReference{Name: "ca"}}}
		})
		mustCreate(nc)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionReady) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonCertManagerMissing))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement(ReasonCertManagerMissing))
		Expect(isAbsent(naming.StatefulSet(nc), &appsv1.StatefulSet{})).To(BeTrue())
	})
})
