package controller

import (
	"sort"

	"narad.dev/broker/internal/meta"
)

// Decommission reason codes (docs/internals/http-api.md §2.16): the 409 refusal, dry runs,
// decommission_blocked and narad_decommission_blocked{node,reason} all use them.
const (
	ReasonMinVoters      = "min_voters"
	ReasonNoLiveMajority = "no_live_majority"
	ReasonNoReceivers    = "no_receivers"
	ReasonDeadOwner      = "dead_owner"
	ReasonMoveTarget     = "move_target"
	ReasonIngressBacklog = "ingress_backlog"
	ReasonLeaderTransfer = "leader_transfer"
)

// Verdict is the evaluation of one node's decommission: Allowed is false when a reason that
// is refused up front holds (min_voters, no_live_majority, no_receivers, dead_owner).
type Verdict struct {
	Node    string   `json:"node"`
	Allowed bool     `json:"allowed"`
	Reasons []string `json:"reasons"`
	// Moves is filled by a dry run only: the moves the planner would make once the node drains.
	Moves []PlannedMove `json:"moves,omitempty"`
	// Missing is filled by a forced decommission refused because its lose list left out
	// single-replica partitions of the dead node (409, dead_owner): exactly those.
	Missing []PartitionRef `json:"missing,omitempty"`
	// Lost is filled by a forced decommission: the single-replica partitions it gave up, each
	// with its new, empty owner (docs/internals/replication.md §9).
	Lost []LostPartition `json:"lost,omitempty"`
}

// PlannedMove is one move of a dry run's plan.
type PlannedMove struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// EvaluateDecommission evaluates the up-front reasons for decommissioning member id on this
// node's current state (call it on the leader, after a barrier for a fresh answer):
// min_voters and no_live_majority for a voter, no_receivers and dead_owner for a node that
// owns partitions. Reasons is never nil. When the Raft configuration cannot be read the
// verdict is not allowed, with no reasons.
func (c *Controller) EvaluateDecommission(id string) Verdict {
	v, err := c.readView()
	if err != nil {
		c.logger.Warn("decommission evaluation failed", "member", id, "err", err)
		return Verdict{Node: id, Reasons: []string{}}
	}
	return v.verdict(id)
}

// clusterView is one consistent read of what decommission decides on: the Raft
// configuration, the member records and, per node, the partitions it owns and the moves
// aimed at it. Lookups of absent IDs yield zero values.
type clusterView struct {
	self      string                     // the leader (this node)
	minVoters int                        // Config.MinVoters
	conf      map[string]meta.RaftServer // servers in the Raft configuration
	members   map[string]meta.Member
	owned     map[string]int // node → partitions it holds: owns, or is a replica of (R ≥ 2)
	targeted  map[string]int // target → moves aimed at it
	// stranded counts, per node, the partitions whose data may exist only on it: the
	// single-replica partitions it owns, and the replicated ones it is a replica of with no
	// other alive member in the ISR (docs/internals/replication.md §9). A dead node with any
	// is refused with dead_owner.
	stranded map[string]int
}

// readView reads the configuration (through Membership), members and assignments.
func (c *Controller) readView() (*clusterView, error) {
	conf, err := c.membership.Configuration()
	if err != nil {
		return nil, err
	}
	v := &clusterView{self: c.cfg.NodeID, minVoters: c.cfg.MinVoters, conf: make(map[string]meta.RaftServer, len(conf)),
		members: memberMap(c.store.Members()), owned: map[string]int{}, targeted: map[string]int{},
		stranded: map[string]int{}}
	for _, srv := range conf {
		v.conf[srv.ID] = srv
	}
	for _, a := range c.store.AllAssignments() {
		for _, id := range holders(a) {
			v.owned[id]++
			if v.onlyCopy(a, id) {
				v.stranded[id]++
			}
		}
		if a.Target != "" {
			v.targeted[a.Target]++
		}
	}
	return v, nil
}

// holders are the nodes a partition's data lives on for decommission: its owner, and every
// replica of a replicated partition.
func holders(a meta.Assignment) []string {
	if len(a.ReplicaSet()) < 2 {
		return []string{a.Owner}
	}
	return a.ReplicaSet()
}

// onlyCopy reports whether node id may hold a's only copy: a single-replica partition it
// owns, or a replicated one with no alive ISR member other than id.
func (v *clusterView) onlyCopy(a meta.Assignment, id string) bool {
	if len(a.ReplicaSet()) < 2 {
		return a.Owner == id
	}
	for _, r := range a.InSync() {
		if r != id && v.alive(r) {
			return false
		}
	}
	return true
}

// alive reports whether id has an alive member record; the leader always counts as alive.
func (v *clusterView) alive(id string) bool {
	return id == v.self || v.members[id].Status == meta.MemberAlive
}

// voter reports whether id is a voter of the configuration.
func (v *clusterView) voter(id string) bool {
	srv, ok := v.conf[id]
	return ok && srv.Voter
}

// promotable counts the non-voters, other than id, with an alive and not draining record:
// C3 promotes one of them in place of a draining voter once it has caught up.
func (v *clusterView) promotable(id string) int {
	n := 0
	for _, srv := range v.conf {
		m, ok := v.members[srv.ID]
		if !srv.Voter && srv.ID != id && ok && m.Status == meta.MemberAlive && !m.Draining {
			n++
		}
	}
	return n
}

// voterReasonsWith returns the voter guards id's removal would break (docs/cluster.md,
// reasons min_voters and no_live_majority): fewer than Config.MinVoters voters left, or the
// voters left with an alive record not a strict majority of them. A non-voter is subject to neither. With spare > 0,
// that many promotable non-voters count as voters for min_voters (the up-front check: the
// decommission can complete once C3 has promoted one).
func (v *clusterView) voterReasonsWith(id string, spare int) []string {
	if !v.voter(id) {
		return nil
	}
	voters, alive := 0, 0
	for _, srv := range v.conf {
		if !srv.Voter || srv.ID == id {
			continue
		}
		voters++
		if v.alive(srv.ID) {
			alive++
		}
	}
	var out []string
	if voters+spare < v.minVoters {
		out = append(out, ReasonMinVoters)
	}
	if 2*alive <= voters {
		out = append(out, ReasonNoLiveMajority)
	}
	return out
}

// upfront returns every reason refused up front (docs/internals/http-api.md §2.16): the voter guards, and,
// when id holds partitions, no_receivers (no other alive, non-draining member can take them)
// and dead_owner (id is dead and holds a partition's only copy: a single-replica partition,
// or a replicated one without another alive ISR member, docs/internals/replication.md §9).
func (v *clusterView) upfront(id string) []string {
	out := v.voterReasonsWith(id, v.promotable(id))
	if v.owned[id] == 0 {
		return out
	}
	receivers := 0
	for _, m := range v.members {
		if m.ID != id && m.Status == meta.MemberAlive && !m.Draining {
			receivers++
		}
	}
	if receivers == 0 {
		out = append(out, ReasonNoReceivers)
	}
	if m, ok := v.members[id]; ok && m.Status == meta.MemberDead && v.stranded[id] > 0 {
		out = append(out, ReasonDeadOwner)
	}
	return out
}

// verdict is the up-front evaluation of id as a Verdict (Reasons never nil).
func (v *clusterView) verdict(id string) Verdict {
	rs := v.upfront(id)
	if rs == nil {
		rs = []string{}
	}
	return Verdict{Node: id, Allowed: len(rs) == 0, Reasons: rs}
}

// drainingOrder returns the draining members in the order C6 considers them for removal:
// dead voters first (removing them restores the live majority the others need), then the
// rest, each group by ID.
func (v *clusterView) drainingOrder() []string {
	var first, rest []string
	for id, m := range v.members {
		switch {
		case !m.Draining:
		case v.voter(id) && !v.alive(id):
			first = append(first, id)
		default:
			rest = append(rest, id)
		}
	}
	sort.Strings(first)
	sort.Strings(rest)
	return append(first, rest...)
}
