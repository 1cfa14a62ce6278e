package server

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/testwait"
)

// fakeRaft is a raftReader over fakeStore's members and assignments.
type fakeRaft struct {
	*fakeStore
	conf    []meta.RaftServer
	confErr error
	contact time.Time
}

func (f *fakeRaft) Term() uint64           { return 4 }
func (f *fakeRaft) CommitIndex() uint64    { return 90 }
func (f *fakeRaft) AppliedIndex() uint64   { return 89 }
func (f *fakeRaft) LastContact() time.Time { return f.contact }
func (f *fakeRaft) Configuration() ([]meta.RaftServer, error) {
	return f.conf, f.confErr
}

func newFakeRaft() *fakeRaft {
	s := newFakeStore()
	s.members = []meta.Member{
		{ID: "n1", Status: meta.MemberAlive},
		{ID: "n2", Status: meta.MemberAlive},
		{ID: "n3", Status: meta.MemberDead, Draining: true}, // died while draining: dead
		{ID: "n4", Status: meta.MemberAlive, Draining: true},
		{ID: "n5", Status: meta.MemberDead, Draining: true}, // decommissioned, then stopped: removed
	}
	s.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n3"})
	s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1"})
	return &fakeRaft{fakeStore: s, conf: []meta.RaftServer{
		{ID: "n1", Voter: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}, {ID: "n4", Voter: false},
	}}
}

// TestMemberCountsUseTheStatusesOfTheMembersEndpoint: narad_cluster_members counts each member
// under the status `narad cluster members` shows, so a decommissioned node that was then shut
// down counts as removed, not dead, and does not page anyone.
func TestMemberCountsUseTheStatusesOfTheMembersEndpoint(t *testing.T) {
	f := newFakeRaft()
	c := clusterMetrics{store: f, now: time.Now}
	want := map[string]int{metrics.MemberAlive: 2, metrics.MemberDead: 1, metrics.MemberDraining: 1, metrics.MemberRemoved: 1}
	if got := c.MemberCounts(); !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	f.confErr = errors.New("closed")
	want = map[string]int{metrics.MemberAlive: 2, metrics.MemberDead: 2, metrics.MemberDraining: 1}
	if got := c.MemberCounts(); !maps.Equal(got, want) {
		t.Fatalf("with the Raft configuration unreadable: counts %v, want %v (no member proven removed)", got, want)
	}
}

// TestMemberStatusesAreTheAPIs: the label values are exactly the statuses the API lists.
func TestMemberStatusesAreTheAPIs(t *testing.T) {
	listed := []string{api.MemberAlive, api.MemberDraining, api.MemberDead, api.MemberRemoved}
	if !slices.Equal(listed, metrics.MemberStatuses) {
		t.Fatalf("metrics.MemberStatuses %v, API statuses %v", metrics.MemberStatuses, listed)
	}
}

func TestRaftStateReadsRoleIndexesContactAndVoters(t *testing.T) {
	f := newFakeRaft()
	now := time.Unix(1000, 0)
	c := clusterMetrics{store: f, now: func() time.Time { return now }}
	st := c.RaftState()
	want := metrics.RaftState{Leader: true, HasLeader: true, Voters: 3, Nonvoters: 1, Term: 4, CommitIndex: 90,
		AppliedIndex: 89, LastContactSeconds: 0}
	if st != want {
		t.Fatalf("leader: %+v, want %+v", st, want)
	}

	f.leading, f.leaderID = false, "n2"
	f.contact = now.Add(-3 * time.Second)
	if st := c.RaftState(); st.Leader || !st.HasLeader || st.LastContactSeconds != 3 {
		t.Fatalf("follower: %+v, want a follower that heard from the leader 3 s ago", st)
	}
	f.leaderID, f.contact = "", time.Time{}
	if st := c.RaftState(); st.HasLeader || !math.IsInf(st.LastContactSeconds, 1) {
		t.Fatalf("isolated: %+v, want no leader and +Inf since contact", st)
	}
}

// TestASingleNodeScrapesAsItsOwnRaftLeaderWithOneAliveMember: the process binds the metastore
// to the Raft and member families, so a node's own scrape shows its leadership and its member.
func TestASingleNodeScrapesAsItsOwnRaftLeaderWithOneAliveMember(t *testing.T) {
	n := startRun(t, devConfig(t, t.TempDir()))
	addr, _ := n.logs.field("narad ready", "http")
	want := []string{
		"narad_raft_leader 1", "narad_raft_has_leader 1", "narad_raft_voters 1", "narad_raft_nonvoters 0",
		"narad_raft_last_contact_seconds 0", `narad_cluster_members{status="alive"} 1`,
		`narad_cluster_members{status="dead"} 0`, `narad_cluster_members{status="draining"} 0`,
		`narad_cluster_members{status="removed"} 0`,
	}
	var missing []string
	testwait.For(t, 20*time.Second, "the Raft and member series of a lone leader", func() bool {
		lines := strings.Split(scrape(t, "http://"+addr+"/metrics"), "\n")
		missing = slices.DeleteFunc(slices.Clone(want), func(l string) bool { return slices.Contains(lines, l) })
		return len(missing) == 0
	})
}
