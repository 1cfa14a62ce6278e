package controller

import (
	"cmp"
	"slices"
	"time"

	"narad.dev/broker/internal/meta"
)

// Leader elections of replicated partitions (docs/internals/replication.md §7, §9): the pure
// planners. They decide on one leaderView and return the elections to propose; elect.go
// proposes them. Only partitions of topics with RF() ≥ 2 are ever looked at: a
// single-replica partition's leader is its owner and keeps the rules of the other duties.

// Preferred-leader rebalance limits (docs/internals/replication.md §9).
const (
	// LeaderImbalancePercent: a node whose misled share of its preferred partitions exceeds
	// this percentage gets them back (Kafka's leader.imbalance.per.broker.percentage).
	LeaderImbalancePercent = 10
	// MaxPreferredElections bounds the preferred elections of one pass over the cluster.
	MaxPreferredElections = 8
)

// election is one ElectLeader proposal: make To the leader of Topic/Partition, whose leader
// epoch must still be Epoch and whose leader was From.
type election struct {
	Topic     string
	Partition int
	Epoch     uint64
	From, To  string
	Reason    string // meta.ElectDead, ElectShutdown, ElectPreferred or ElectUnclean
}

// leaderView is one read of what the election duties decide on. Its judgements use the
// controller's clock; heartbeat stamps are Unix seconds on the proposer's clock, as for C1.
type leaderView struct {
	self      string        // this node, the Raft leader: always alive
	now       time.Time     // the controller's clock
	since     time.Time     // when this leadership started
	failAfter time.Duration // Config.ReplicaFailoverAfter
	topics    map[string]meta.Topic
	members   map[string]meta.Member
	parts     []meta.Assignment // the replicated partitions, by topic then partition
}

// newLeaderView keeps the assignments of replicated topics (RF() ≥ 2, a leader set, more than
// one replica) in topic/partition order.
func newLeaderView(self string, now, since time.Time, failAfter time.Duration,
	topics []meta.Topic, members []meta.Member, assignments []meta.Assignment) *leaderView {
	v := &leaderView{self: self, now: now, since: since, failAfter: failAfter,
		topics: make(map[string]meta.Topic, len(topics)), members: memberMap(members)}
	for _, t := range topics {
		v.topics[t.Name] = t
	}
	for _, a := range assignments {
		if t, ok := v.topics[a.Topic]; ok && t.RF() >= 2 && a.Owner != "" && len(a.ReplicaSet()) >= 2 {
			v.parts = append(v.parts, a)
		}
	}
	slices.SortFunc(v.parts, func(x, y meta.Assignment) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return v
}

// live reports whether id may be elected: never a member in a controlled shutdown (its record
// says stopping); otherwise this node, or a member whose record says alive and whose last
// heartbeat is at most failAfter old. No grace for a new controller here: a candidate must have
// proved itself alive.
func (v *leaderView) live(id string) bool {
	if v.members[id].Stopping {
		return false
	}
	if id == v.self {
		return true
	}
	m, ok := v.members[id]
	return ok && m.Status == meta.MemberAlive && v.now.Sub(time.Unix(m.LastHeartbeat, 0)) <= v.failAfter
}

// failed reports whether leader id has lost its partitions: its record is gone or dead, or it
// has been silent for more than failAfter. As in C1, silence is measured from no earlier than
// the start of this leadership, so a new controller never deposes leaders on stamps it
// inherited; and this node is never failed.
func (v *leaderView) failed(id string) bool {
	if id == v.self {
		return false
	}
	m, ok := v.members[id]
	if !ok || m.Status == meta.MemberDead {
		return true
	}
	last := time.Unix(m.LastHeartbeat, 0)
	if v.since.After(last) {
		last = v.since
	}
	return v.now.Sub(last) > v.failAfter
}

// failoverPlan is planFailover's answer: the elections, and the partitions whose leader failed
// that wait because no replica can be elected.
type failoverPlan struct {
	elections []election
	waiting   []meta.Assignment
}

// planFailover is the failover election rule (docs/internals/replication.md §7): for each
// replicated partition whose leader failed, the first replica in replica order that is in the
// ISR, is not the old leader and is live (reason dead); with none, when the topic allows
// unclean election, the first live replica other than the old leader (reason unclean); else the
// partition waits. A partition with a single-replica move in flight is left alone (op 24
// refuses it).
func (v *leaderView) planFailover() failoverPlan {
	var p failoverPlan
	for _, a := range v.parts {
		if a.Target != "" || !v.failed(a.Owner) {
			continue
		}
		if to := v.firstLive(a.ReplicaSet(), a.Owner, a.InSync()); to != "" {
			p.elections = append(p.elections, v.electionOf(a, to, meta.ElectDead))
			continue
		}
		if v.topics[a.Topic].UncleanLeaderElection {
			if to := v.firstLive(a.ReplicaSet(), a.Owner, nil); to != "" {
				p.elections = append(p.elections, v.electionOf(a, to, meta.ElectUnclean))
				continue
			}
		}
		p.waiting = append(p.waiting, a)
	}
	return p
}

// firstLive returns the first of replicas, other than old, that is live and (when within is
// not nil) a member of within; "" when there is none.
func (v *leaderView) firstLive(replicas []string, old string, within []string) string {
	for _, r := range replicas {
		if r != old && v.live(r) && (within == nil || slices.Contains(within, r)) {
			return r
		}
	}
	return ""
}

func (v *leaderView) electionOf(a meta.Assignment, to, reason string) election {
	return election{Topic: a.Topic, Partition: a.Partition, Epoch: a.LeaderEpoch, From: a.Owner, To: to, Reason: reason}
}

// imbalance returns, per node, how many replicated partitions it is the preferred leader of
// (replicas[0]) and how many of those another node leads.
func (v *leaderView) imbalance() (preferred, misled map[string]int) {
	preferred, misled = map[string]int{}, map[string]int{}
	for _, a := range v.parts {
		pref := a.ReplicaSet()[0]
		preferred[pref]++
		if a.Owner != pref {
			misled[pref]++
		}
	}
	return preferred, misled
}

// imbalanced reports whether node n's leader imbalance exceeds LeaderImbalancePercent:
// misled / preferred > 10 %, in integers 100 · misled > 10 · preferred.
func imbalanced(preferred, misled int) bool {
	return preferred > 0 && 100*misled > LeaderImbalancePercent*preferred
}

// planPreferred is the preferred-leader rebalance (docs/internals/replication.md §9): for each
// node whose imbalance exceeds LeaderImbalancePercent, every partition it is the preferred
// leader of and does not lead is elected back to it (reason preferred) when it is live, in the
// ISR and not draining and no move of either kind is in flight (a replica move's leadership
// is C12's: it may be leaving the preferred leader); at most max elections, in
// topic/partition order over the cluster.
func (v *leaderView) planPreferred(max int) []election { return v.preferredPlan(max, false) }

// preferredPlan is planPreferred; with anyImbalance (an operator's request) every such
// partition qualifies, whatever its preferred leader's imbalance.
func (v *leaderView) preferredPlan(max int, anyImbalance bool) []election {
	preferred, misled := v.imbalance()
	var out []election
	for _, a := range v.parts {
		if len(out) >= max {
			break
		}
		pref := a.ReplicaSet()[0]
		switch {
		case a.Owner == pref, a.Target != "", len(a.MoveTarget()) > 0, !anyImbalance && !imbalanced(preferred[pref], misled[pref]):
		case !slices.Contains(a.InSync(), pref), !v.live(pref), v.members[pref].Draining:
		default:
			out = append(out, v.electionOf(a, pref, meta.ElectPreferred))
		}
	}
	return out
}

// planShutdown is controlled shutdown (docs/internals/replication.md §9): for each replicated
// partition led by a member in stopping (every stopping member when stopping is nil), the first
// replica in replica order that is in the ISR, is not the leader and is live (so not stopping
// either), reason shutdown. A partition whose leader failed is planFailover's. A partition with
// a single-replica move in flight, or with no such replica, is left with its leader: it is
// counted in stuck, and the failover of §7 takes it once the leader is gone. led counts the
// partitions the stopping members lead.
func (v *leaderView) planShutdown(stopping func(id string) bool) (es []election, led, stuck int) {
	if stopping == nil {
		stopping = func(id string) bool { return v.members[id].Stopping }
	}
	for _, a := range v.parts {
		if !stopping(a.Owner) || v.failed(a.Owner) {
			continue
		}
		led++
		to := ""
		if a.Target == "" {
			to = v.firstLive(a.ReplicaSet(), a.Owner, a.InSync())
		}
		if to == "" {
			stuck++
			continue
		}
		es = append(es, v.electionOf(a, to, meta.ElectShutdown))
	}
	return es, led, stuck
}
