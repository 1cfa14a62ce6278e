package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"narad.dev/operator/naming"
)

func podOn(image string, deleting bool) corev1.Pod {
	p := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "rack-sidecar", Image: "other:9.9.9"}, {Name: naming.ContainerName, Image: image}}}}
	if deleting {
		p.DeletionTimestamp = new(metav1.Now())
	}
	return p
}

func TestRunningVersionIsWhatEveryPodRuns(t *testing.T) {
	cases := []struct {
		name string
		pods []corev1.Pod
		prev string
		want string
	}{
		{"no pods keeps the last version", nil, "0.1.0", "0.1.0"},
		{"all on one tag", []corev1.Pod{podOn("r/narad:0.2.0", false), podOn("r/narad:0.2.0", false)}, "0.1.0", "0.2.0"},
		{"mid-roll keeps the version all ran", []corev1.Pod{podOn("r/narad:0.2.0", false), podOn("r/narad:0.1.0", false)}, "0.1.0", "0.1.0"},
		{"a pod being deleted does not count", []corev1.Pod{podOn("r/narad:0.2.0", false), podOn("r/narad:0.1.0", true)}, "0.1.0", "0.2.0"},
		{"a digest-only image has no tag", []corev1.Pod{podOn("r/narad@sha256:00ff", false)}, "0.1.0", ""},
	}
	for _, c := range cases {
		if got := runningVersion(c.pods, c.prev); got != c.want {
			t.Errorf("%s: runningVersion = %q, want %q", c.name, got, c.want)
		}
	}
}
