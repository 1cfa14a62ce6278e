package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// A member that left Raft, owns nothing and has no pod any more is not listed; one that left
// Raft but still has its pod (the scale-down is shrinking the StatefulSet) still is.
func TestMemberStatusesDropNodesThatLeftAndWhosePodIsGone(t *testing.T) {
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "c-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c-2"}}}
	got := memberStatuses(nc, []client.Member{
		{ID: "c-0", RaftRole: "voter", Status: "alive", OwnedPartitions: 3},
		{ID: "c-2", RaftRole: "none", Status: "draining", Draining: true},
		{ID: "c-3", RaftRole: "none", Status: "dead", Draining: true},
		{ID: "c-4", RaftRole: "none", Status: "dead", OwnedPartitions: 1},
	}, pods)
	var ids []string
	for _, m := range got {
		ids = append(ids, m.NodeID+"/"+m.Pod)
	}
	want := []string{"c-0/c-0", "c-2/c-2", "c-4/"}
	if len(ids) != len(want) || ids[0] != want[0] || ids[1] != want[1] || ids[2] != want[2] {
		t.Fatalf("members = %v, want %v", ids, want)
	}
}
