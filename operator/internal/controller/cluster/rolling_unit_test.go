package cluster

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// rollPod is pod ordinal of nc on rev, ready or not, with UID "uid-<ordinal>".
func rollPod(nc *naradv1.NaradCluster, ordinal int32, rev string, ready bool) corev1.Pod {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	name := naming.PodName(nc, ordinal)
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}},
	}
}

func TestRollingRestartPolicy(t *testing.T) {
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	three := int32(3)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.StatefulSetSpec{Replicas: &three},
		Status:     appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "new"},
	}
	stale := sts.DeepCopy()
	stale.Status.ObservedGeneration = 1
	deleting := rollPod(nc, 0, "old", true)
	deleting.DeletionTimestamp = &metav1.Time{}

	tests := []struct {
		name     string
		sts      *appsv1.StatefulSet
		pods     []corev1.Pod
		leader   string
		inflight types.UID
		victim   string // "" when none may go
		wait     string // substring of the reason to wait
		outdated int
	}{
		{name: "nothing outdated", sts: sts, leader: "c-0", pods: []corev1.Pod{
			rollPod(nc, 0, "new", true), rollPod(nc, 1, "new", true), rollPod(nc, 2, "new", true)}},
		{name: "highest ordinal first", sts: sts, leader: "c-0", victim: "c-2", outdated: 3, pods: []corev1.Pod{
			rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "old", true)}},
		{name: "the leader's pod last even when it is the highest", sts: sts, leader: "c-2", victim: "c-1", outdated: 3, pods: []corev1.Pod{
			rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "old", true)}},
		{name: "the leader's pod when it is the only one left", sts: sts, leader: "c-1", victim: "c-1", outdated: 1, pods: []corev1.Pod{
			rollPod(nc, 0, "new", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "new", true)}},
		{name: "waits for a recreated pod to be ready", sts: sts, leader: "c-0", wait: "c-2 is not ready", outdated: 2, pods: []corev1.Pod{
			rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "new", false)}},
		{name: "waits for a missing pod", sts: sts, leader: "c-0", wait: "2 of 3 pods exist", outdated: 2, pods: []corev1.Pod{
			rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true)}},
		{name: "waits for a terminating pod", sts: sts, leader: "c-1", wait: "c-0 is terminating", outdated: 2, pods: []corev1.Pod{
			deleting, rollPod(nc, 1, "old", true), rollPod(nc, 2, "old", true)}},
		{name: "a pod deleted but still in the cache counts as terminating", sts: sts, leader: "c-0", inflight: "uid-c-2",
			wait: "c-2 is terminating", outdated: 2, pods: []corev1.Pod{
				rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "old", true)}},
		{name: "waits for a Raft leader", sts: sts, leader: "", wait: "no Raft leader", outdated: 3, pods: []corev1.Pod{
			rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "old", true)}},
		{name: "waits for the StatefulSet controller", sts: stale, leader: "c-0", wait: "not observed", outdated: 3, pods: []corev1.Pod{
			rollPod(nc, 0, "old", true), rollPod(nc, 1, "old", true), rollPod(nc, 2, "old", true)}},
		{name: "ignores ordinals beyond the replicas", sts: sts, leader: "c-0", outdated: 0, pods: []corev1.Pod{
			rollPod(nc, 0, "new", true), rollPod(nc, 1, "new", true), rollPod(nc, 2, "new", true), rollPod(nc, 3, "old", false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planRoll(nc, tc.sts, tc.pods, tc.leader, tc.inflight)
			victim := ""
			if plan.Victim != nil {
				victim = plan.Victim.Name
			}
			if victim != tc.victim || plan.Outdated != tc.outdated {
				t.Fatalf("victim %q outdated %d, want %q and %d (wait %q)", victim, plan.Outdated, tc.victim, tc.outdated, plan.Wait)
			}
			if tc.wait == "" && plan.Wait != "" || !strings.Contains(plan.Wait, tc.wait) {
				t.Fatalf("wait %q, want it to contain %q", plan.Wait, tc.wait)
			}
		})
	}
}

func TestBrokerConfigKeysAreServeFlags(t *testing.T) {
	retention, parts, maxParts := int64(3600000), int32(4), int32(50)
	nc := &naradv1.NaradCluster{Spec: naradv1.NaradClusterSpec{Broker: naradv1.BrokerConfig{
		RetentionMs: &retention, DefaultPartitions: &parts, MaxPartitions: &maxParts, LogLevel: "error",
		MaxConsumeWait: &metav1.Duration{Duration: 90e9}}}}
	want := "log-level: \"error\"\nmax-consume-wait: \"1m30s\"\ntopic-default-partitions: 4\n" +
		"topic-default-retention-ms: 3600000\ntopic-max-partitions: 50\n"
	if got := brokerConfig(nc); got != want {
		t.Fatalf("config\n%s\nwant\n%s", got, want)
	}
	if got := brokerConfig(&naradv1.NaradCluster{}); got != "{}\n" {
		t.Fatalf("empty config %q", got)
	}
}

// The replication defaults: R follows spec.replicas (3 from three brokers up, else 1, which
// is the broker's own default and left out) unless spec.topicDefaults names it; M only when set.
func TestBrokerConfigCarriesTheReplicationDefaults(t *testing.T) {
	three, two := int32(3), int32(2)
	for _, c := range []struct {
		name     string
		replicas int32
		defaults naradv1.TopicDefaults
		want     string
	}{
		{"one broker", 1, naradv1.TopicDefaults{}, "{}\n"},
		{"two brokers", 2, naradv1.TopicDefaults{}, "{}\n"},
		{"three brokers", 3, naradv1.TopicDefaults{}, "default-replication-factor: 3\n"},
		{"five brokers", 5, naradv1.TopicDefaults{}, "default-replication-factor: 3\n"},
		{"explicit R2 M2", 5, naradv1.TopicDefaults{ReplicationFactor: &two, MinInSyncReplicas: &two},
			"default-min-insync-replicas: 2\ndefault-replication-factor: 2\n"},
		{"M alone on one broker", 1, naradv1.TopicDefaults{MinInSyncReplicas: &three}, "default-min-insync-replicas: 3\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc := &naradv1.NaradCluster{Spec: naradv1.NaradClusterSpec{Replicas: c.replicas, TopicDefaults: c.defaults}}
			if got := brokerConfig(nc); got != c.want {
				t.Fatalf("config %q, want %q", got, c.want)
			}
		})
	}
}

func TestConfigHashFollowsConfigAndSecretVersions(t *testing.T) {
	base := configHash("a: 1\n", []string{"s@1", "t@5"})
	if configHash("a: 1\n", []string{"t@5", "s@1"}) != base {
		t.Fatal("hash depends on the order of the Secrets")
	}
	for _, other := range []string{configHash("a: 2\n", []string{"s@1", "t@5"}), configHash("a: 1\n", []string{"s@2", "t@5"})} {
		if other == base {
			t.Fatal("hash did not change")
		}
	}
}
