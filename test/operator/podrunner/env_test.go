package podrunner

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpandFollowsKubeletRules(t *testing.T) {
	vars := map[string]string{"POD_NAME": "nc-1", "NS": "prod"}
	for _, tc := range []struct{ in, want string }{
		{"$(POD_NAME)", "nc-1"},
		{"$(POD_NAME).nc-headless.$(NS).svc:7943", "nc-1.nc-headless.prod.svc:7943"},
		{"$(UNSET)/x", "$(UNSET)/x"},
		{"$$(POD_NAME)", "$(POD_NAME)"},
		{"cost $5", "cost $5"},
		{"$(POD_NAME", "$(POD_NAME"},
		{"trailing $", "trailing $"},
		{"", ""},
	} {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAddressesMapToLoopback(t *testing.T) {
	m := hostMapper{ownIP: "127.0.0.101", podIP: func(ns, pod string) string {
		if ns == "prod" && pod == "nc-2" {
			return "127.0.0.102"
		}
		return ""
	}}
	for _, tc := range []struct{ in, want string }{
		{":7942", "127.0.0.101:7942"},
		{"0.0.0.0:7943", "127.0.0.101:7943"},
		{"nc-2.nc-headless.prod.svc:7943", "127.0.0.102:7943"},
		{"nc-2.nc-headless.prod.svc.cluster.local:7943", "127.0.0.102:7943"},
		{"nc-0.nc-headless.prod.svc:7943,nc-2.nc-headless.prod.svc:7943", "nc-0.nc-headless.prod.svc:7943,127.0.0.102:7943"},
		{"example.com:80", "example.com:80"},
		{"", ""},
	} {
		if got := m.rewriteAddresses(tc.in); got != tc.want {
			t.Errorf("rewriteAddresses(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMountPathsMapToHostDirsLongestFirst(t *testing.T) {
	m := newPathMapper([]mountDir{{path: "/etc/narad", dir: "/tmp/a"}, {path: "/etc/narad/config", dir: "/tmp/cfg"},
		{path: "/var/lib/narad", dir: "/tmp/pvc"}})
	for _, tc := range []struct{ in, want string }{
		{"/etc/narad/config/narad.yaml", "/tmp/cfg/narad.yaml"},
		{"/etc/narad/tls/tls.crt", "/tmp/a/tls/tls.crt"},
		{"/var/lib/narad", "/tmp/pvc"},
		{"/var/lib/narad/data", "/tmp/pvc/data"},
		{"/var/lib/naradx", "/var/lib/naradx"},
		{"relative", "relative"},
	} {
		if got := m.rewrite(tc.in); got != tc.want {
			t.Errorf("rewrite(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := m.rewriteArg("--config=/etc/narad/config/x.yaml"); got != "--config=/tmp/cfg/x.yaml" {
		t.Errorf("rewriteArg = %q", got)
	}
	if got := m.rewriteArg("--heartbeat-interval=1s"); got != "--heartbeat-interval=1s" {
		t.Errorf("rewriteArg changed a non-path flag: %q", got)
	}
}

func TestPodNamesSplitIntoSetAndOrdinal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		sts  string
		ord  int32
		okay bool
	}{
		{"nc-0", "nc", 0, true}, {"my-cluster-12", "my-cluster", 12, true},
		{"nc-01", "", 0, false}, {"nc-", "", 0, false}, {"nc", "", 0, false},
	} {
		sts, ord, ok := splitOrdinal(tc.in)
		if ok != tc.okay || sts != tc.sts || ord != tc.ord {
			t.Errorf("splitOrdinal(%q) = %q, %d, %v", tc.in, sts, ord, ok)
		}
	}
}

func TestRevisionIsStableAndFollowsTheTemplate(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}
	s.Spec.Template.Labels = map[string]string{"a": "b"}
	r1 := Revision(s)
	if r2 := Revision(s.DeepCopy()); r1 != r2 {
		t.Fatalf("revision not stable: %s vs %s", r1, r2)
	}
	s.Spec.Replicas = new(int32)
	if Revision(s) != r1 {
		t.Fatal("revision changed with replicas, not the template")
	}
	s.Spec.Template.Annotations = map[string]string{"narad.dev/config-hash": "x"}
	if Revision(s) == r1 {
		t.Fatal("revision did not change with the template")
	}
}

func TestPreStopSleepIsRead(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName,
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}}}}}
	if d := preStopSleep(pod); d != 5*time.Second {
		t.Fatalf("preStopSleep = %s", d)
	}
	pod.Spec.Containers[0].Lifecycle = nil
	if d := preStopSleep(pod); d != 0 {
		t.Fatalf("preStopSleep without a hook = %s", d)
	}
}

func TestNewPodFollowsTheStatefulSetController(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "nc", Namespace: "ns", UID: "u1"}}
	s.Spec.ServiceName = "nc-headless"
	s.Spec.Template.Labels = map[string]string{"app": "x"}
	s.Spec.Template.Spec.Containers = []corev1.Container{{Name: ContainerName}}
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	p := newPod(s, "nc-2", 2, "nc-abc")
	if p.Labels[appsv1.ControllerRevisionHashLabelKey] != "nc-abc" || p.Labels[LabelPodName] != "nc-2" || p.Labels["app"] != "x" {
		t.Fatalf("labels: %v", p.Labels)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != "u1" || !*p.OwnerReferences[0].Controller {
		t.Fatalf("owner: %+v", p.OwnerReferences)
	}
	if p.Spec.Hostname != "nc-2" || p.Spec.Subdomain != "nc-headless" || p.Spec.NodeName != NodeName {
		t.Fatalf("spec: %+v", p.Spec)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-nc-2" {
		t.Fatalf("volumes: %+v", p.Spec.Volumes)
	}
}
