package cluster

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

func part(topic string, p, r, m int, leader string, replicas, isr []string) client.PartitionReplicas {
	return client.PartitionReplicas{Topic: topic, Partition: p, ReplicationFactor: r, MinInsyncReplicas: m,
		Leader: leader, Replicas: replicas, ISR: isr, UnderReplicated: len(isr) < r || leader == ""}
}

func TestAssessReplicasCountsOnlyReplicatedPartitions(t *testing.T) {
	abc := []string{"a", "b", "c"}
	h := assessReplicas([]client.PartitionReplicas{
		part("one", 0, 1, 1, "a", []string{"a"}, []string{"a"}),          // R = 1: never counts
		part("full", 0, 3, 2, "a", abc, abc),                             // spare replica
		part("short", 0, 3, 2, "b", abc, []string{"a", "b"}),             // at min ISR, misled
		part("mr", 0, 2, 2, "a", []string{"a", "b"}, []string{"a", "b"}), // M = R: never a spare
		part("leaderless", 0, 3, 1, "", abc, abc),                        // no leader: under-replicated
	})
	if got := names(h.AtMinISR); got != "short/0 mr/0" {
		t.Errorf("AtMinISR = %s", got)
	}
	if got := names(h.Under); got != "short/0 leaderless/0" {
		t.Errorf("Under = %s", got)
	}
	if h.Misled != 1 {
		t.Errorf("Misled = %d, want 1", h.Misled)
	}
}

func names(ps []client.PartitionReplicas) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Topic+"/"+strconv.Itoa(p.Partition))
	}
	return strings.Join(out, " ")
}

func TestPlanDisruptions(t *testing.T) {
	atMin := replicaHealth{AtMinISR: []client.PartitionReplicas{part("o", 0, 3, 2, "a", nil, []string{"a", "b"})}}
	for _, tc := range []struct {
		name   string
		h      replicaHealth
		prev   bool
		want   bool
		reason string
	}{
		{"nothing replicated", replicaHealth{}, false, false, ReasonReplicasToSpare},
		{"a partition at min ISR", atMin, false, true, ReasonPartitionsAtMinISR},
		{"unreadable at first", replicaHealth{Err: errors.New("down")}, false, false, ReasonPartitionsUnknown},
		{"unreadable while blocked", replicaHealth{Err: errors.New("down")}, true, true, ReasonPartitionsUnknown},
		{"unblocked", replicaHealth{}, true, false, ReasonReplicasToSpare},
	} {
		got := planDisruptions(tc.h, tc.prev)
		if got.Blocked != tc.want || got.Reason != tc.reason {
			t.Errorf("%s: got %+v, want blocked %v reason %s", tc.name, got, tc.want, tc.reason)
		}
		if pdb := desiredPDB(&naradv1.NaradCluster{}, got.Blocked); pdb.Spec.MaxUnavailable.IntValue() != maxUnavailable(got.Blocked) {
			t.Errorf("%s: PDB maxUnavailable %v", tc.name, pdb.Spec.MaxUnavailable)
		}
	}
}

func TestDescribePartitionsIsBounded(t *testing.T) {
	var ps []client.PartitionReplicas
	for i := range 7 {
		ps = append(ps, part("t", i, 3, 2, "a", nil, []string{"a"}))
	}
	got := describePartitions(ps)
	if !strings.HasSuffix(got, " and 4 more") || strings.Count(got, "t/") != maxNamedPartitions {
		t.Errorf("describePartitions = %q", got)
	}
}

func TestWaitForReplicas(t *testing.T) {
	victim := &corev1.Pod{}
	under := replicaHealth{Under: []client.PartitionReplicas{part("o", 1, 3, 2, "a", nil, []string{"a", "b"})}}
	if p := waitForReplicas(rollPlan{Victim: victim, Outdated: 2}, replicaHealth{}); p.Victim != victim || p.Wait != "" {
		t.Errorf("full ISR: %+v", p)
	}
	if p := waitForReplicas(rollPlan{Victim: victim, Outdated: 2}, under); p.Victim != nil || !strings.Contains(p.Wait, "o/1 (2 of 3 in sync, min 2)") {
		t.Errorf("under-replicated: %+v", p)
	}
	if p := waitForReplicas(rollPlan{Victim: victim}, replicaHealth{Err: errors.New("down")}); p.Victim != nil || !strings.Contains(p.Wait, "down") {
		t.Errorf("unreadable: %+v", p)
	}
	if p := waitForReplicas(rollPlan{Wait: "pod x is not ready"}, under); p.Wait != "pod x is not ready" {
		t.Errorf("an earlier wait is kept: %+v", p)
	}
}

func TestPinnedHost(t *testing.T) {
	pv := func(terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
			Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}
	}
	host := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	for _, tc := range []struct {
		pv   *corev1.PersistentVolume
		want string
	}{
		{&corev1.PersistentVolume{}, ""},
		{pv(host(hostnameLabel, corev1.NodeSelectorOpIn, "w1")), "w1"},
		{pv(host(hostnameLabel, corev1.NodeSelectorOpIn, "w1", "w2")), ""},
		{pv(host("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "z1")), ""},
		{pv(host(hostnameLabel, corev1.NodeSelectorOpNotIn, "w1")), ""},
		{pv(host(hostnameLabel, corev1.NodeSelectorOpIn, "w1"), host(hostnameLabel, corev1.NodeSelectorOpIn, "w2")), ""},
	} {
		if got := pinnedHost(tc.pv); got != tc.want {
			t.Errorf("pinnedHost(%+v) = %q, want %q", tc.pv.Spec.NodeAffinity, got, tc.want)
		}
	}
}

func TestBudgetMemoryOutlivesAStaleStatus(t *testing.T) {
	r := &Reconciler{}
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	if r.budgetWasClosed(nc) {
		t.Fatal("a cluster never seen, with no condition: open")
	}
	nc.Status.Conditions = []metav1.Condition{{Type: naradv1.ConditionDisruptionsBlocked, Status: metav1.ConditionTrue}}
	if !r.budgetWasClosed(nc) {
		t.Fatal("after an operator restart the condition tells: closed")
	}
	r.budgets.Store(nc.UID, true)
	nc.Status.Conditions = []metav1.Condition{{Type: naradv1.ConditionDisruptionsBlocked, Status: metav1.ConditionFalse}}
	if !r.budgetWasClosed(nc) {
		t.Fatal("a stale status saying open must not override this process's own last decision")
	}
}
