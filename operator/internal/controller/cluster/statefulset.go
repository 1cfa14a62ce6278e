package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Pod contract details that naming does not hold (common brief, "Pod contract").
const (
	// ConfigHashAnnotation on the pod template changes whenever the config file or one of the
	// Secrets the pods mount changes, so the change rolls the pods.
	ConfigHashAnnotation = "narad.dev/config-hash"

	configVolume        = "config"
	clusterSecretVolume = "cluster-secret"
	adminSecretVolume   = "admin-secret"
	tlsVolume           = "tls"

	// TLS Secret keys (kubernetes.io/tls plus the CA for mutual TLS between nodes).
	tlsCertKey = "tls.crt"
	tlsKeyKey  = "tls.key"
	tlsCAKey   = "ca.crt"

	// preStopSeconds: the pod leaves the Service endpoints before SIGTERM, so no new produce
	// reaches it; SIGTERM then drains what is in flight (broker shutdown-grace, 10 s default).
	preStopSeconds = 5
	// brokerUID is the non-root user of the broker image (broker/Dockerfile).
	brokerUID = 65532
	// terminationGraceSeconds covers the preStop sleep (5 s), the controlled shutdown's hand-off
	// of the replicated partitions the broker leads (at most 10 s, docs/replication.md
	// "Controlled shutdown and preferred leaders"), the Raft leadership transfer, and the
	// brokers' shutdown grace for in-flight requests (10 s), with room to spare.
	terminationGraceSeconds = 45

	// defaultStorageSize is the claim size when spec.storage.size is absent.
	defaultStorageSize = "10Gi"
)

// configHash digests the config file and the resourceVersions of the Secrets the pods use
// (given as "name@resourceVersion"); it is stable for equal inputs.
func configHash(configData string, secretVersions []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "config\x00%s\x00", configData)
	for _, v := range slices.Sorted(slices.Values(secretVersions)) {
		fmt.Fprintf(h, "secret\x00%s\x00", v)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// image is the broker image of nc.
func (r *Reconciler) image(nc *naradv1.NaradCluster) string {
	switch {
	case nc.Spec.Image != "":
		return nc.Spec.Image
	case r.Image != "":
		return r.Image
	default:
		return naming.DefaultImage
	}
}

// desiredStatefulSet builds nc's StatefulSet with the given replica count (decided by the
// scale code) and config hash. existing (nil on creation) supplies the claim template's class
// and size, which a StatefulSet cannot change.
func (r *Reconciler) desiredStatefulSet(nc *naradv1.NaradCluster, replicas int32, hash string, existing *appsv1.StatefulSet) *appsv1.StatefulSet {
	podAnnotations := map[string]string{ConfigHashAnnotation: hash}
	if v, ok := nc.Annotations[naming.RestartedAtAnnotation]; ok {
		podAnnotations[naming.RestartedAtAnnotation] = v
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(nc, naming.StatefulSet(nc)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: naming.Selector(nc)},
			ServiceName:         naming.HeadlessService(nc),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: naming.Labels(nc), Annotations: podAnnotations},
				Spec:       r.podSpec(nc),
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claimTemplate(nc, existing)},
		},
	}
}

// claimTemplate is the data volume claim of every pod.
func claimTemplate(nc *naradv1.NaradCluster, existing *appsv1.StatefulSet) corev1.PersistentVolumeClaim {
	size := resource.MustParse(defaultStorageSize)
	if nc.Spec.Storage.Size != nil {
		size = *nc.Spec.Storage.Size
	}
	class := nc.Spec.Storage.StorageClassName
	if existing != nil {
		for _, t := range existing.Spec.VolumeClaimTemplates {
			if t.Name == naming.DataVolume {
				size = t.Spec.Resources.Requests[corev1.ResourceStorage]
				class = t.Spec.StorageClassName
			}
		}
	}
	return corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: naming.DataVolume, Labels: naming.Labels(nc)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
}

// storageChangeIgnored says whether spec.storage asks for a class the existing claim template
// does not have (a StatefulSet's claim templates are immutable). A larger size is not ignored:
// storage.go grows the claims themselves.
func storageChangeIgnored(nc *naradv1.NaradCluster, existing *appsv1.StatefulSet) bool {
	if existing == nil {
		return false
	}
	wc, hc := claimTemplate(nc, nil).Spec.StorageClassName, claimTemplate(nc, existing).Spec.StorageClassName
	return wc != nil && (hc == nil || *wc != *hc)
}

// podSpec is the broker pod per the pod contract.
func (r *Reconciler) podSpec(nc *naradv1.NaradCluster) corev1.PodSpec {
	s := nc.Spec.Scheduling
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: new(int64(terminationGraceSeconds)),
		Affinity:                      affinity(nc),
		Tolerations:                   slices.Clone(s.Tolerations),
		NodeSelector:                  maps.Clone(s.NodeSelector),
		PriorityClassName:             s.PriorityClassName,
		TopologySpreadConstraints:     spreadConstraints(nc),
		Containers:                    []corev1.Container{r.brokerContainer(nc)},
		Volumes:                       podVolumes(nc),
		// The broker image runs as 65532; fsGroup makes the data volume writable for it.
		SecurityContext: podSecurityContext(),
	}
	if r.rackEnabled(nc) {
		addRack(&spec, nc, r.RackImage)
	}
	return spec
}

// spreadConstraints copies spec.scheduling.topologySpreadConstraints, selecting the cluster's
// pods where a constraint selects nothing; with none given, the pods spread over zones
// (defaultSpread).
func spreadConstraints(nc *naradv1.NaradCluster) []corev1.TopologySpreadConstraint {
	if len(nc.Spec.Scheduling.TopologySpreadConstraints) == 0 {
		return defaultSpread(nc)
	}
	var out []corev1.TopologySpreadConstraint
	for _, c := range nc.Spec.Scheduling.TopologySpreadConstraints {
		c = *c.DeepCopy()
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: naming.Selector(nc)}
		}
		out = append(out, c)
	}
	return out
}

func (r *Reconciler) brokerContainer(nc *naradv1.NaradCluster) corev1.Container {
	scheme := corev1.URISchemeHTTP
	if naming.TLSEnabled(nc) {
		scheme = corev1.URISchemeHTTPS
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromString(naming.HTTPPortName), Scheme: scheme}},
			PeriodSeconds: period, TimeoutSeconds: 3, FailureThreshold: failures,
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: naming.DataVolume, MountPath: naming.DataMountPath},
		{Name: configVolume, MountPath: naming.ConfigMountPath, ReadOnly: true},
		{Name: clusterSecretVolume, MountPath: naming.ClusterSecretMountPath, ReadOnly: true},
		{Name: adminSecretVolume, MountPath: naming.AdminSecretMountPath, ReadOnly: true},
	}
	if naming.TLSEnabled(nc) {
		mounts = append(mounts, corev1.VolumeMount{Name: tlsVolume, MountPath: naming.TLSMountPath, ReadOnly: true})
	}
	resources := brokerResources(nc)
	env := brokerEnv(nc)
	if v, ok := goMemLimit(resources); ok {
		env = append(env, v)
	}
	return corev1.Container{
		Name:            naming.ContainerName,
		Image:           r.image(nc),
		ImagePullPolicy: nc.Spec.ImagePullPolicy,
		Command:         []string{"narad", "serve"},
		Args:            slices.Clone(nc.Spec.Broker.ExtraArgs),
		Env:             env,
		Ports: []corev1.ContainerPort{
			{Name: naming.HTTPPortName, ContainerPort: naming.HTTPPort, Protocol: corev1.ProtocolTCP},
			{Name: naming.ClusterPortName, ContainerPort: naming.ClusterPort, Protocol: corev1.ProtocolTCP},
		},
		Resources:       resources,
		SecurityContext: restrictedContainer(),
		// Startup allows a restarted node its caught-up wait (60 s) and more: 60 × 5 s.
		StartupProbe:   probe("/healthz", 5, 60),
		LivenessProbe:  probe("/healthz", 10, 3),
		ReadinessProbe: probe("/readyz", 5, 3),
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			// The kubelet's own sleep: the broker image is distroless, with no sleep binary.
			Sleep: &corev1.SleepAction{Seconds: preStopSeconds}}},
		VolumeMounts: mounts,
	}
}

// brokerEnv is the container environment, in the contract's order ($(VAR) references only
// point backwards).
func brokerEnv(nc *naradv1.NaradCluster) []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	val := func(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }
	members := make([]string, 0, nc.Spec.InitialClusterSize)
	join := make([]string, 0, nc.Spec.InitialClusterSize)
	for i := int32(0); i < nc.Spec.InitialClusterSize; i++ {
		members = append(members, naming.NodeID(nc, i))
		join = append(join, naming.PodHost(nc, i)+":"+strconv.Itoa(naming.ClusterPort))
	}
	env := []corev1.EnvVar{
		field("POD_NAME", "metadata.name"),
		field("POD_NAMESPACE", "metadata.namespace"),
		val("NARAD_NODE_ID", "$(POD_NAME)"),
		val("NARAD_HTTP_ADDR", ":"+strconv.Itoa(naming.HTTPPort)),
		val("NARAD_CLUSTER_ADDR", ":"+strconv.Itoa(naming.ClusterPort)),
		val("NARAD_ADVERTISE_ADDR", "$(POD_NAME)."+naming.HeadlessService(nc)+".$(POD_NAMESPACE).svc:"+strconv.Itoa(naming.ClusterPort)),
		val("NARAD_INITIAL_MEMBERS", strings.Join(members, ",")),
		val("NARAD_JOIN", strings.Join(join, ",")),
		val("NARAD_DATA_DIR", naming.DataDir),
		val("NARAD_CONFIG", naming.ConfigMountPath+"/"+naming.ConfigFileName),
		val("NARAD_CLUSTER_SECRET_FILE", naming.ClusterSecretMountPath+"/"+naradv1.ClusterSecretKey),
		val("NARAD_ADMIN_PASSWORD_FILE", naming.AdminSecretMountPath+"/"+naradv1.AdminPasswordKey),
	}
	if naming.TLSEnabled(nc) {
		env = append(env,
			val("NARAD_TLS_CERT", naming.TLSMountPath+"/"+tlsCertKey),
			val("NARAD_TLS_KEY", naming.TLSMountPath+"/"+tlsKeyKey),
			val("NARAD_CLUSTER_TLS_CA", naming.TLSMountPath+"/"+tlsCAKey))
	}
	return env
}

func podVolumes(nc *naradv1.NaradCluster) []corev1.Volume {
	secret := func(volume, secretName, key string) corev1.Volume {
		return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secretName, Items: []corev1.KeyToPath{{Key: key, Path: key}}}}}
	}
	vols := []corev1.Volume{
		{Name: configVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: naming.ConfigMap(nc)},
			Items:                []corev1.KeyToPath{{Key: naming.ConfigFileName, Path: naming.ConfigFileName}}}}},
		secret(clusterSecretVolume, naming.ClusterSecret(nc), naradv1.ClusterSecretKey),
		secret(adminSecretVolume, naming.AdminSecret(nc), naradv1.AdminPasswordKey),
	}
	if name := naming.TLSSecret(nc); name != "" {
		vols = append(vols, corev1.Volume{Name: tlsVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: name}}})
	}
	return vols
}
