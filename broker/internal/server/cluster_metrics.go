package server

import (
	"math"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
)

// clusterMetrics is the node's metrics.ClusterSource (docs/internals/metrics.md §8, "Raft and
// members"): the metastore's Raft state, and the members counted by the status `narad cluster
// members` shows (memberStatus, decommissioned). It reads only this node's replica, so a
// node cut off from the leader still answers, with what it last knew.
type clusterMetrics struct {
	store raftReader
	now   func() time.Time
}

// raftReader is what clusterMetrics reads of the metastore (meta.Store); every method reads
// local state only.
type raftReader interface {
	IsLeader() bool
	Leader() (id, addr string)
	Term() uint64
	CommitIndex() uint64
	AppliedIndex() uint64
	LastContact() time.Time
	Configuration() ([]meta.RaftServer, error)
	Members() []meta.Member
	AllAssignments() []meta.Assignment
}

var _ raftReader = (*meta.Store)(nil)

// RaftState reads the Raft role, indexes and configuration of this node.
func (c clusterMetrics) RaftState() metrics.RaftState {
	leaderID, _ := c.store.Leader()
	st := metrics.RaftState{
		Leader:       c.store.IsLeader(),
		HasLeader:    leaderID != "",
		Term:         c.store.Term(),
		CommitIndex:  c.store.CommitIndex(),
		AppliedIndex: c.store.AppliedIndex(),
	}
	switch last := c.store.LastContact(); {
	case st.Leader:
		st.LastContactSeconds = 0
	case last.IsZero():
		st.LastContactSeconds = math.Inf(1)
	default:
		st.LastContactSeconds = max(0, c.now().Sub(last).Seconds())
	}
	if conf, err := c.store.Configuration(); err == nil {
		for _, srv := range conf {
			if srv.Voter {
				st.Voters++
			} else {
				st.Nonvoters++
			}
		}
	}
	return st
}

// MemberCounts counts the members of the local replica by status. A member counts as
// removed only when the Raft configuration could be read (an unreadable one proves nothing).
func (c clusterMetrics) MemberCounts() map[string]int {
	roles := map[string]string{}
	conf, confErr := c.store.Configuration()
	for _, srv := range conf {
		roles[srv.ID] = pick(srv.Voter, meta.RaftVoter, meta.RaftNonvoter)
	}
	owned, targeted := map[string]int{}, map[string]bool{}
	for _, a := range c.store.AllAssignments() {
		owned[a.Owner]++
		if a.Target != "" {
			targeted[a.Target] = true
		}
	}
	counts := map[string]int{}
	for _, m := range c.store.Members() {
		role, ok := roles[m.ID]
		if !ok {
			role = meta.RaftNone
		}
		status := memberStatus(m)
		if confErr == nil && decommissioned(m, role, owned[m.ID], targeted[m.ID]) {
			status = metrics.MemberRemoved
		}
		counts[status]++
	}
	return counts
}
