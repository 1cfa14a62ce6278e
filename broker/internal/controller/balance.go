package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
)

// Replica balance (docs/internals/replication.md §9, "Moves"): duty C13 balances the
// replicas, then the preferred leaders, of replicated partitions over the nodes that may hold
// them. A move is a recorded intent, not a recomputation: one op 25 adds the destination and
// records the replica list the move ends with (meta.Assignment.TargetReplicas); C12 then
// carries it out (wait for the ISR, move leadership, drop the source) and no later pass
// re-plans the partition until the target is reached or abandoned. Single-replica partitions
// are C5's and are not counted.

// MaxPreferredRotations bounds the preferred-leader rotations of one pass over the cluster.
const MaxPreferredRotations = 8

// replicaMove is one proposal of C13: op 25 under Epoch with Replicas and the ISR read.
// Target is set for a replica move (Replicas = the replicas read + To; Target = the replicas
// read with From's place taken by To); nil for a rotation (the same replicas with From, the
// preferred leader, and To swapped).
type replicaMove struct {
	Topic     string
	Partition int
	Epoch     uint64
	Replicas  []string
	ISR       []string
	Target    []string
	From, To  string
}

// balance is one planning of C13 over a leaderView.
//
// Invariant: replicas and preferred count, per eligible node, the replicas and replicas[0]
// of every replicated partition as it will be once the moves in flight and the ones planned
// so far have completed.
type balance struct {
	v         *leaderView
	racks     map[string]string // eligible node → failure-domain key
	ids       []string          // eligible nodes, by ID
	replicas  map[string]int
	preferred map[string]int
	planned   map[partitionRef]bool // the partitions planned this pass
	inFlight  int                   // partitions with a replica move target
}

// newBalance counts the partitions of v over nodes, keeping those v judges live.
func newBalance(v *leaderView, nodes []placement.Node) *balance {
	b := &balance{v: v, racks: map[string]string{}, replicas: map[string]int{}, preferred: map[string]int{},
		planned: map[partitionRef]bool{}}
	for _, n := range nodes {
		if v.live(n.ID) {
			b.racks[n.ID] = rackKey(n)
			b.ids = append(b.ids, n.ID)
		}
	}
	for _, a := range v.parts {
		set := a.ReplicaSet()
		if t := a.MoveTarget(); len(t) > 0 {
			set = t
			b.inFlight++
		}
		for _, id := range set {
			b.replicas[id]++
		}
		b.preferred[set[0]]++
	}
	return b
}

// rackKey is n's failure domain: its rack, or the node itself (never equal to a named rack).
func rackKey(n placement.Node) string {
	if n.Rack == "" {
		return "\x00" + n.ID
	}
	return n.Rack
}

// planBalance returns C13's proposals for one pass: replica moves while the in-flight ones
// leave room under maxInFlight, then at most maxRotations preferred-leader rotations.
func (v *leaderView) planBalance(nodes []placement.Node, maxInFlight, maxRotations int) []replicaMove {
	b := newBalance(v, nodes)
	var out []replicaMove
	for b.inFlight < maxInFlight {
		mv, ok := b.bestMove()
		if !ok {
			break
		}
		b.apply(mv)
		out = append(out, mv)
	}
	for range maxRotations {
		mv, ok := b.bestRotation()
		if !ok {
			break
		}
		b.apply(mv)
		out = append(out, mv)
	}
	return out
}

// steady reports whether the membership lets C13 plan: every member alive by its record,
// none draining and none stopping. A dead node, a decommission or a controlled shutdown is
// C10's and C12's to handle; balancing meanwhile would only add copies to undo. A draining
// member that is no replica of a replicated partition is left out: C12 is done with it, and
// its record (draining, soon dead once removed from Raft) stays until C9 collects it, an hour
// after it died, so counting it would stop the balance for that long after every
// decommission.
func (v *leaderView) steady() bool {
	for _, m := range v.members {
		if m.Draining && !v.holdsReplica(m.ID) {
			continue
		}
		if m.Status != meta.MemberAlive || m.Draining || m.Stopping {
			return false
		}
	}
	return true
}

// holdsReplica reports whether node id is in the replica list of a replicated partition.
func (v *leaderView) holdsReplica(id string) bool {
	return slices.ContainsFunc(v.parts, func(a meta.Assignment) bool { return slices.Contains(a.ReplicaSet(), id) })
}

// movable reports whether a may be planned: no move of either kind in flight or planned, its
// replication factor reached with every replica in the ISR, every replica on an eligible node
// (so C12 has nothing to do), and its leader not failed.
func (b *balance) movable(a meta.Assignment) bool {
	reps := a.ReplicaSet()
	if a.Target != "" || len(a.MoveTarget()) > 0 || b.planned[partitionRef{a.Topic, a.Partition}] ||
		len(reps) != b.v.topics[a.Topic].RF() || len(a.InSync()) != len(reps) || b.v.failed(a.Owner) {
		return false
	}
	for _, id := range reps {
		if _, ok := b.racks[id]; !ok {
			return false
		}
	}
	return true
}

// bestMove is the replica move that most reduces the imbalance (docs/internals/replication.md
// §9): from a node with at least two replicas more than the destination, so the sum of
// squared replica counts strictly falls and moves can never undo each other. Among them: the
// largest difference; then a move that also evens the preferred leaders (the destination
// takes the source's place in the order, so a preferred source hands the preference on),
// before one that leaves them, before one that worsens them; then one whose source does not
// lead; then topic, partition, source, destination order. The destination never lowers the
// number of racks the partition spans.
func (b *balance) bestMove() (replicaMove, bool) {
	var best lowestKey
	for _, a := range b.v.parts {
		if !b.movable(a) {
			continue
		}
		reps := a.ReplicaSet()
		for i, src := range reps {
			for _, dst := range b.ids {
				gap := b.replicas[src] - b.replicas[dst]
				if gap < 2 || slices.Contains(reps, dst) || !b.keepsRacks(reps, i, dst) {
					continue
				}
				key := []int{-gap, b.preferenceRank(i == 0, src, dst), boolInt(src == a.Owner)}
				best.offer(key, func() replicaMove {
					target := slices.Clone(reps)
					target[i] = dst
					return replicaMove{Topic: a.Topic, Partition: a.Partition, Epoch: a.LeaderEpoch,
						Replicas: append(slices.Clone(reps), dst), ISR: slices.Clone(a.InSync()), Target: target,
						From: src, To: dst}
				})
			}
		}
	}
	return best.mv, best.found
}

// lowestKey keeps the candidate with the lowest key (slices.Compare order) of those offered;
// on equal keys the first offered stays, so the planners' iteration order breaks ties.
type lowestKey struct {
	mv    replicaMove
	key   []int
	found bool
}

// offer builds the candidate only when key beats the one kept.
func (l *lowestKey) offer(key []int, build func() replicaMove) {
	if l.found && slices.Compare(key, l.key) >= 0 {
		return
	}
	l.mv, l.key, l.found = build(), key, true
}

// preferenceRank ranks what a move does to the preferred-leader counts: 0 evens them (a
// preferred source with at least two more than the destination), 1 leaves them, 2 worsens.
func (b *balance) preferenceRank(srcPreferred bool, src, dst string) int {
	if !srcPreferred {
		return 1
	}
	switch d := b.preferred[src] - b.preferred[dst]; {
	case d >= 2:
		return 0
	case d == 1:
		return 1
	}
	return 2
}

// keepsRacks reports whether replacing reps[i] by dst keeps the number of racks reps span.
func (b *balance) keepsRacks(reps []string, i int, dst string) bool {
	span := func(ids []string) int {
		seen := map[string]bool{}
		for _, id := range ids {
			seen[b.racks[id]] = true
		}
		return len(seen)
	}
	after := slices.Clone(reps)
	after[i] = dst
	return span(after) >= span(reps)
}

// bestRotation is the preferred-leader rotation that most evens the preferred leaders: a
// partition whose preferred leader has at least two more preferences than another of its
// replicas gets that replica first (the two swap places). No copy moves; C11 then elects the
// new preferred leader. Among them: the largest difference, then a partition the new
// preferred leader already leads (no election needed), then topic/partition order.
func (b *balance) bestRotation() (replicaMove, bool) {
	var best lowestKey
	for _, a := range b.v.parts {
		if !b.movable(a) {
			continue
		}
		reps := a.ReplicaSet()
		for i, to := range reps[1:] {
			gap := b.preferred[reps[0]] - b.preferred[to]
			if gap < 2 {
				continue
			}
			best.offer([]int{-gap, boolInt(a.Owner != to)}, func() replicaMove {
				order := slices.Clone(reps)
				order[0], order[i+1] = to, reps[0]
				return replicaMove{Topic: a.Topic, Partition: a.Partition, Epoch: a.LeaderEpoch,
					Replicas: order, ISR: slices.Clone(a.InSync()), From: reps[0], To: to}
			})
		}
	}
	return best.mv, best.found
}

// apply counts a planned proposal into the balance.
func (b *balance) apply(mv replicaMove) {
	b.planned[partitionRef{mv.Topic, mv.Partition}] = true
	if mv.Target != nil {
		b.inFlight++
		b.replicas[mv.From]--
		b.replicas[mv.To]++
		if mv.Target[0] == mv.To {
			b.preferred[mv.From]--
			b.preferred[mv.To]++
		}
		return
	}
	b.preferred[mv.From]--
	b.preferred[mv.To]++
}

// partitionRef names one partition.
type partitionRef struct {
	topic     string
	partition int
}

func boolInt(x bool) int {
	if x {
		return 1
	}
	return 0
}

// balanceReplicas is C13: plan (planBalance) and propose the pass's replica moves and
// preferred-leader rotations, each an op 25 under the leader epoch read. A refused or
// vanished CAS is left to the next pass, which plans on the new record.
func (c *Controller) balanceReplicas(ctx context.Context) error {
	if !c.cfg.BalanceReplicas {
		return nil
	}
	v := c.readLeaderView()
	if !v.steady() {
		return nil
	}
	for _, mv := range v.planBalance(placement.Nodes(c.store.Members()), c.cfg.MaxInFlightMoves, MaxPreferredRotations) {
		if err := c.proposeBalance(ctx, mv); err != nil {
			return err
		}
	}
	return nil
}

// proposeBalance proposes one C13 step; a refusal is logged at debug and skipped.
func (c *Controller) proposeBalance(ctx context.Context, mv replicaMove) error {
	step := "rotate"
	if mv.Target != nil {
		step = "move"
	}
	res, cur, err := c.store.ReassignReplicas(ctx, mv.Topic, mv.Partition, mv.Epoch, mv.Replicas, mv.ISR, mv.Target)
	switch {
	case err == nil && res == meta.CASDone:
		c.logger.Info("replica balance step", "topic", mv.Topic, "partition", mv.Partition, "step", step,
			"from", mv.From, "to", mv.To, "replicas", mv.Replicas, "target_replicas", mv.Target, "epoch", mv.Epoch)
		c.audit(ctx, "cluster.partition.reassign", fmt.Sprintf("%s/%d", mv.Topic, mv.Partition), nil,
			"step", step, "from", mv.From, "to", mv.To, "replicas", mv.Replicas, "target_replicas", mv.Target)
	case err == nil:
	case errors.Is(err, meta.ErrConflict), errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrInvalid):
		c.logger.Debug("replica balance step skipped", "topic", mv.Topic, "partition", mv.Partition, "step", step,
			"replicas", mv.Replicas, "current_replicas", cur.ReplicaSet(), "current_epoch", cur.LeaderEpoch, "err", err)
	default:
		return err
	}
	return nil
}
