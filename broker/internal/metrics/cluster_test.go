package metrics

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

type fakeCluster struct {
	st     RaftState
	counts map[string]int
}

func (f fakeCluster) RaftState() RaftState         { return f.st }
func (f fakeCluster) MemberCounts() map[string]int { return f.counts }

// value is the value of the one series of name whose labels include want (nil: any).
func value(t *testing.T, m *Metrics, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := gather(t, m)[name]
	if !ok {
		t.Fatalf("%s: not in the scrape", name)
	}
	var found []*dto.Metric
	for _, s := range f.GetMetric() {
		match := true
		for _, lp := range s.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
				match = false
			}
		}
		if match {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, want, len(found))
	}
	return found[0].GetGauge().GetValue()
}

// TestRaftAndMemberFamiliesExistBeforeTheSourceIsBound: an alert on has_leader == 0 or on dead
// members needs the series from the first scrape, also on a node still opening its metastore.
func TestRaftAndMemberFamiliesExistBeforeTheSourceIsBound(t *testing.T) {
	m := New()
	for _, name := range []string{"narad_raft_leader", "narad_raft_has_leader", "narad_raft_voters",
		"narad_raft_nonvoters", "narad_raft_term", "narad_raft_commit_index", "narad_raft_applied_index"} {
		if v := value(t, m, name, nil); v != 0 {
			t.Errorf("%s = %v unbound, want 0", name, v)
		}
	}
	if v := value(t, m, "narad_raft_last_contact_seconds", nil); !math.IsInf(v, 1) {
		t.Errorf("narad_raft_last_contact_seconds = %v unbound, want +Inf (never heard from a leader)", v)
	}
	if got := len(gather(t, m)["narad_cluster_members"].GetMetric()); got != len(MemberStatuses) {
		t.Errorf("narad_cluster_members: %d series, want one per status (%d)", got, len(MemberStatuses))
	}
}

// TestRaftAndMemberFamiliesReportTheBoundSourceAtEachScrape: every scrape reads the source
// again (no stale poll), and member statuses outside the fixed set never become series.
func TestRaftAndMemberFamiliesReportTheBoundSourceAtEachScrape(t *testing.T) {
	m := New()
	src := &fakeCluster{
		st: RaftState{Leader: true, HasLeader: true, Voters: 3, Nonvoters: 1, Term: 7, CommitIndex: 120,
			AppliedIndex: 118, LastContactSeconds: 0},
		counts: map[string]int{MemberAlive: 2, MemberDead: 1, MemberDraining: 1, "client-chosen": 9},
	}
	m.Cluster.Bind(src)
	for name, want := range map[string]float64{
		"narad_raft_leader": 1, "narad_raft_has_leader": 1, "narad_raft_voters": 3, "narad_raft_nonvoters": 1,
		"narad_raft_term": 7, "narad_raft_commit_index": 120, "narad_raft_applied_index": 118,
		"narad_raft_last_contact_seconds": 0,
	} {
		if v := value(t, m, name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for status, want := range map[string]float64{MemberAlive: 2, MemberDead: 1, MemberDraining: 1, MemberRemoved: 0} {
		if v := value(t, m, "narad_cluster_members", map[string]string{"status": status}); v != want {
			t.Errorf("narad_cluster_members{status=%q} = %v, want %v", status, v, want)
		}
	}
	if got := len(gather(t, m)["narad_cluster_members"].GetMetric()); got != len(MemberStatuses) {
		t.Errorf("narad_cluster_members: %d series, want only the %d fixed statuses", got, len(MemberStatuses))
	}

	src.st = RaftState{Voters: 3, Term: 8, LastContactSeconds: 12.5}
	src.counts = map[string]int{MemberAlive: 3}
	if v := value(t, m, "narad_raft_leader", nil); v != 0 {
		t.Errorf("narad_raft_leader = %v after losing leadership, want 0", v)
	}
	if v := value(t, m, "narad_raft_has_leader", nil); v != 0 {
		t.Errorf("narad_raft_has_leader = %v with no leader known, want 0", v)
	}
	if v := value(t, m, "narad_raft_last_contact_seconds", nil); v != 12.5 {
		t.Errorf("narad_raft_last_contact_seconds = %v, want 12.5", v)
	}
	if v := value(t, m, "narad_cluster_members", map[string]string{"status": MemberDead}); v != 0 {
		t.Errorf("narad_cluster_members{status=dead} = %v after recovery, want 0", v)
	}
}
