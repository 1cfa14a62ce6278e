package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	naradv1 "narad.dev/api/v1alpha1"
)

// A default fills only what spec.resources leaves unsaid about a resource, so it never
// contradicts the user (a default request above their limit would make the pod invalid).
func TestBrokerResourcesDefaultOnlyWhatTheSpecLeavesOut(t *testing.T) {
	q := resource.MustParse
	for name, tc := range map[string]struct {
		spec, want corev1.ResourceRequirements
	}{
		"empty": {
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: q("2Gi")},
			},
		},
		"memory limit below the default request": {
			spec: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q("256Mi")}},
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: q("256Mi")},
			},
		},
		"memory request only: no limit forced on it": {
			spec: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("8Gi")}},
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("8Gi")},
			},
		},
		"cpu limit only": {
			spec: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("100m")}},
			want: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: q("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("2Gi")},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			nc := &naradv1.NaradCluster{Spec: naradv1.NaradClusterSpec{Resources: *tc.spec.DeepCopy()}}
			got := brokerResources(nc)
			if !equalList(got.Requests, tc.want.Requests) || !equalList(got.Limits, tc.want.Limits) {
				t.Errorf("brokerResources(%v) = %v, want %v", tc.spec, got, tc.want)
			}
			if !equalList(nc.Spec.Resources.Requests, tc.spec.Requests) || !equalList(nc.Spec.Resources.Limits, tc.spec.Limits) {
				t.Errorf("the spec was modified: %v", nc.Spec.Resources)
			}
		})
	}
}

func equalList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !v.Equal(w) {
			return false
		}
	}
	return true
}

func TestGoMemLimitIsNinetyPercentOfTheMemoryLimit(t *testing.T) {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1000")}}
	if v, ok := goMemLimit(r); !ok || v.Name != "GOMEMLIMIT" || v.Value != "900" {
		t.Errorf("goMemLimit(1000 bytes) = %+v %v, want GOMEMLIMIT=900", v, ok)
	}
	if v, ok := goMemLimit(corev1.ResourceRequirements{}); ok {
		t.Errorf("goMemLimit without a limit = %+v, want none", v)
	}
}
