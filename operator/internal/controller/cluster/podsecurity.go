package cluster

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	naradv1 "narad.dev/api/v1alpha1"
)

// Pod security and resources of the broker pods (docs/kubernetes.md, "Pod security"): every
// container passes the restricted Pod Security Standard, and a broker without
// spec.resources gets requests the scheduler can count on and a memory limit the Go runtime
// knows about.
const (
	// defaultCPURequest and defaultMemoryRequest are the broker's requests when spec.resources
	// names neither a request nor a limit for that resource.
	defaultCPURequest    = "250m"
	defaultMemoryRequest = "512Mi"
	// defaultMemoryLimit applies when spec.resources says nothing about memory at all. No CPU
	// limit: throttling a broker stretches its fsync and heartbeat latencies for nothing.
	defaultMemoryLimit = "2Gi"
	// goMemLimitPercent of the memory limit is the broker's GOMEMLIMIT: the garbage collector
	// works harder near it instead of letting the kernel OOM-kill the pod at the limit.
	goMemLimitPercent = 90
	// goMemLimitEnv is the Go runtime's soft memory limit variable, in bytes.
	goMemLimitEnv = "GOMEMLIMIT"
)

// restrictedContainer is the container security context the restricted Pod Security Standard
// asks for; the pod's context (podSecurityContext) supplies the user and the seccomp profile.
// The broker writes only under its data volume, so its root filesystem is read-only.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		RunAsNonRoot:             new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// podSecurityContext runs every container of the pod as the broker image's non-root user with
// the runtime's default seccomp profile; fsGroup makes the data volume writable for it.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        new(true),
		RunAsUser:           new(int64(brokerUID)),
		RunAsGroup:          new(int64(brokerUID)),
		FSGroup:             new(int64(brokerUID)),
		FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// brokerResources is spec.resources with the defaults filled in: a request for CPU or memory
// when spec.resources names neither a request nor a limit for it, and the memory limit when it
// says nothing about memory. What the spec sets is never changed, so a default can never
// contradict it (a default request above a limit the user chose, say).
func brokerResources(nc *naradv1.NaradCluster) corev1.ResourceRequirements {
	out := *nc.Spec.Resources.DeepCopy()
	mentions := func(name corev1.ResourceName) bool {
		_, req := out.Requests[name]
		_, lim := out.Limits[name]
		return req || lim
	}
	if !mentions(corev1.ResourceMemory) {
		out.Limits = withDefault(out.Limits, corev1.ResourceMemory, defaultMemoryLimit)
	}
	for name, value := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: defaultCPURequest, corev1.ResourceMemory: defaultMemoryRequest,
	} {
		_, req := out.Requests[name]
		_, lim := nc.Spec.Resources.Limits[name]
		if !req && !lim {
			out.Requests = withDefault(out.Requests, name, value)
		}
	}
	return out
}

func withDefault(l corev1.ResourceList, name corev1.ResourceName, value string) corev1.ResourceList {
	if l == nil {
		l = corev1.ResourceList{}
	}
	l[name] = resource.MustParse(value)
	return l
}

// goMemLimit is the GOMEMLIMIT variable for a container with resources r, or false when r has
// no memory limit (the runtime then has no limit to respect).
func goMemLimit(r corev1.ResourceRequirements) (corev1.EnvVar, bool) {
	limit, ok := r.Limits[corev1.ResourceMemory]
	if !ok || limit.Value() <= 0 {
		return corev1.EnvVar{}, false
	}
	bytes := limit.Value() / 100 * goMemLimitPercent
	return corev1.EnvVar{Name: goMemLimitEnv, Value: strconv.FormatInt(bytes, 10)}, true
}
