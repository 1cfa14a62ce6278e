package metrics

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The Raft and membership families (docs/internals/metrics.md §8, "Raft and members"): read
// from the metastore at each scrape rather than by a poller, so the first scrape after the
// HTTP listener opens already says whether this node sees a Raft leader and which members
// are dead. Their series always exist: zeros while no ClusterSource is bound.

// Member statuses of narad_cluster_members, as `narad cluster members` shows them
// (docs/cluster.md): a member is counted under exactly one.
const (
	MemberAlive    = "alive"
	MemberDraining = "draining"
	MemberDead     = "dead"
	MemberRemoved  = "removed"
)

// MemberStatuses is the fixed label set of narad_cluster_members{status}.
var MemberStatuses = []string{MemberAlive, MemberDraining, MemberDead, MemberRemoved}

// RaftState is this node's view of the metadata Raft group at one scrape.
type RaftState struct {
	Leader       bool   // this node is the Raft leader
	HasLeader    bool   // this node knows a leader (itself included)
	Voters       int    // voters in the latest configuration this node knows
	Nonvoters    int    // non-voters (and staging servers) in it
	Term         uint64 // current term
	CommitIndex  uint64 // highest index this node knows committed
	AppliedIndex uint64 // highest index applied to the FSM
	// LastContactSeconds: 0 on the leader; on a follower, seconds since it last heard from
	// the leader; +Inf when it never has.
	LastContactSeconds float64
}

// ClusterSource answers the Raft and membership families. It is called on the scrape's
// goroutine, concurrently with everything else, so it must only read in-memory state and
// the local metastore replica (no call to another node).
type ClusterSource interface {
	RaftState() RaftState
	// MemberCounts counts the members of the local replica by status; keys are from
	// MemberStatuses (any other key is ignored).
	MemberCounts() map[string]int
}

// ClusterCollector exports the Raft and membership families from its bound ClusterSource.
type ClusterCollector struct {
	src atomic.Pointer[ClusterSource]

	leader, hasLeader, voters, nonvoters         *prometheus.Desc
	term, commitIndex, appliedIndex, lastContact *prometheus.Desc
	members                                      *prometheus.Desc
}

func newClusterCollector() *ClusterCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &ClusterCollector{
		leader:       d("narad_raft_leader", "1 on the node that is the metadata Raft leader, else 0."),
		hasLeader:    d("narad_raft_has_leader", "1 while this node knows a metadata Raft leader (itself included), else 0."),
		voters:       d("narad_raft_voters", "Voters in the latest Raft configuration this node knows."),
		nonvoters:    d("narad_raft_nonvoters", "Non-voters in the latest Raft configuration this node knows."),
		term:         d("narad_raft_term", "This node's current Raft term."),
		commitIndex:  d("narad_raft_commit_index", "Highest Raft log index this node knows to be committed."),
		appliedIndex: d("narad_raft_applied_index", "Highest Raft log index applied to this node's metadata state machine."),
		lastContact:  d("narad_raft_last_contact_seconds", "Seconds since this follower last heard from the Raft leader; 0 on the leader, +Inf before any contact."),
		members:      d("narad_cluster_members", "Cluster members in this node's metadata replica, by status.", "status"),
	}
}

// Bind makes src the source of every later scrape.
func (c *ClusterCollector) Bind(src ClusterSource) { c.src.Store(&src) }

// Describe sends the descriptors of every family.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.hasLeader, c.voters, c.nonvoters, c.term,
		c.commitIndex, c.appliedIndex, c.lastContact, c.members} {
		ch <- d
	}
}

// Collect reads the bound source once and sends one series per family and per status.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	st, counts := RaftState{LastContactSeconds: math.Inf(1)}, map[string]int{}
	if p := c.src.Load(); p != nil {
		st, counts = (*p).RaftState(), (*p).MemberCounts()
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.leader, bit(st.Leader))
	g(c.hasLeader, bit(st.HasLeader))
	g(c.voters, float64(st.Voters))
	g(c.nonvoters, float64(st.Nonvoters))
	g(c.term, float64(st.Term))
	g(c.commitIndex, float64(st.CommitIndex))
	g(c.appliedIndex, float64(st.AppliedIndex))
	g(c.lastContact, st.LastContactSeconds)
	for _, s := range MemberStatuses {
		g(c.members, float64(counts[s]), s)
	}
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
