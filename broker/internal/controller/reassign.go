package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
)

// Replica reassignment (docs/internals/replication.md §9): duty C12 brings the replica set of
// every replicated partition to its desired set, one step per partition per pass. Raising or
// lowering a topic's replication factor, re-replication after a node has been dead for
// ReReplicateAfter and the decommission of a node (alive or dead) are all this one mechanism.

// MaxReassignSteps bounds the reassignment steps (op 25 or a leadership move) of one pass
// over the cluster.
const MaxReassignSteps = 8

// Kinds of a reassignment step.
const (
	stepAdd  = "add"  // op 25: the replicas gain the desired nodes they lack (out of sync)
	stepLead = "lead" // op 24 (reason reassign): leadership moves to a desired in-sync replica
	stepDrop = "drop" // op 25: the replicas become the desired set
	// stepClear: op 25 with the replicas and ISR unchanged and target_replicas = the replicas:
	// an abandoned replica move target that no other step voids is cleared.
	stepClear = "clear"
)

// reassignStep is one proposal of C12 under the leader epoch the plan read.
type reassignStep struct {
	Kind      string
	Topic     string
	Partition int
	Epoch     uint64
	Replicas  []string // stepAdd, stepDrop: the new replica list
	ISR       []string // stepAdd, stepDrop, stepClear: the new ISR (never a member added)
	Target    []string // stepClear: the replicas (clears the move target)
	From, To  string   // stepLead: the leader and its successor
}

// leavingSet reports whether a replica on node id must be replaced
// (docs/internals/replication.md §9): its member record is gone, it is draining (a
// decommission, alive or dead), or it has been dead, on this leader's clock, for
// ReReplicateAfter (0 = never).
type leavingSet func(id string) bool

// leaving builds the leavingSet of one pass over v.
func (c *Controller) leaving(v *leaderView) leavingSet {
	c.mu.Lock()
	deadSince := maps.Clone(c.deadSince)
	c.mu.Unlock()
	after := c.cfg.ReReplicateAfter
	return func(id string) bool {
		m, ok := v.members[id]
		switch {
		case !ok || m.Draining:
			return true
		case m.Status != meta.MemberDead || after <= 0:
			return false
		}
		since, ok := deadSince[id]
		return ok && v.now.Sub(since) >= after
	}
}

// reassignReplicas is C12: plan (planReassign) and propose the pass's reassignment steps. A
// refused or vanished CAS is left to the next pass, which plans on the new record.
func (c *Controller) reassignReplicas(ctx context.Context) error {
	v := c.readLeaderView()
	members := c.store.Members()
	steps := v.planReassign(c.leaving(v), placement.Nodes(members), placement.LoadOf(c.store.AllAssignments()), MaxReassignSteps)
	var elections []election
	for _, s := range steps {
		if s.Kind == stepLead {
			elections = append(elections, election{Topic: s.Topic, Partition: s.Partition, Epoch: s.Epoch,
				From: s.From, To: s.To, Reason: meta.ElectReassign})
			continue
		}
		if err := c.setReplicas(ctx, s); err != nil {
			return err
		}
	}
	return c.elect(ctx, elections)
}

// setReplicas proposes one op 25 step; a refusal is logged at debug and skipped.
func (c *Controller) setReplicas(ctx context.Context, s reassignStep) error {
	res, cur, err := c.store.ReassignReplicas(ctx, s.Topic, s.Partition, s.Epoch, s.Replicas, s.ISR, s.Target)
	switch {
	case err == nil && res == meta.CASDone:
		c.logger.Info("partition replicas reassigned", "topic", s.Topic, "partition", s.Partition, "step", s.Kind,
			"replicas", s.Replicas, "isr", s.ISR, "epoch", s.Epoch)
		c.audit(ctx, "cluster.partition.reassign", fmt.Sprintf("%s/%d", s.Topic, s.Partition), nil,
			"step", s.Kind, "replicas", s.Replicas, "isr", s.ISR)
	case err == nil:
	case errors.Is(err, meta.ErrConflict), errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrInvalid):
		c.logger.Debug("replica reassignment skipped", "topic", s.Topic, "partition", s.Partition, "step", s.Kind,
			"replicas", s.Replicas, "current_replicas", cur.ReplicaSet(), "current_epoch", cur.LeaderEpoch, "err", err)
	default:
		return err
	}
	return nil
}

// planReassign returns at most max steps, one per partition, in topic/partition order. A
// partition with a single-replica move in flight, or whose leader failed (C10 elects first),
// is left alone. The desired set is the partition's replica move target while it holds
// (moveTarget), else desiredReplicas; an abandoned target that needs no step to void it is
// cleared (stepClear). nodes and load are what replacements are placed on
// (load is updated with each pick).
func (v *leaderView) planReassign(leaving leavingSet, nodes []placement.Node, load map[string]placement.Load, max int) []reassignStep {
	racks := make(map[string]string, len(v.members))
	for id, m := range v.members {
		racks[id] = m.Rack
	}
	var out []reassignStep
	for _, a := range v.parts {
		if len(out) >= max {
			break
		}
		if a.Target != "" || v.failed(a.Owner) {
			continue
		}
		want := v.moveTarget(a, leaving)
		if want == nil {
			want = desiredReplicas(a, v.topics[a.Topic].RF(), leaving, nodes, racks, load)
		}
		if s, ok := v.nextStep(a, want); ok {
			out = append(out, s)
		} else if len(a.MoveTarget()) > 0 && !slices.Equal(want, a.MoveTarget()) {
			out = append(out, reassignStep{Kind: stepClear, Topic: a.Topic, Partition: a.Partition, Epoch: a.LeaderEpoch,
				Replicas: a.ReplicaSet(), ISR: a.InSync(), Target: a.ReplicaSet()})
		}
	}
	return out
}

// moveTarget returns a's replica move target (meta.Assignment.TargetReplicas, set by the
// balance planner) while it holds: RF replicas, none leaving, and each one not yet in the ISR
// alive by its member record. Otherwise nil: the move is abandoned, and desiredReplicas, which
// drops the surplus out-of-sync replicas first, takes the destination out again (op 25 then
// clears the target).
func (v *leaderView) moveTarget(a meta.Assignment, leaving leavingSet) []string {
	t := a.MoveTarget()
	if len(t) == 0 || len(t) != v.topics[a.Topic].RF() {
		return nil
	}
	for _, id := range t {
		if leaving(id) || (!slices.Contains(a.InSync(), id) && v.members[id].Status != meta.MemberAlive) {
			return nil
		}
	}
	return t
}

// desiredReplicas is the replica set partition a should have (docs/internals/replication.md
// §9): its replicas that are not leaving, in order; above r, the surplus is dropped from the
// end, out-of-sync replicas first and never the leader; below r, replacements are placed
// after them with placement.ExtendReplicas (the current replicas avoided, the rack rule
// kept). When the nodes cannot make up r, no replica leaves: the set is the current replicas
// plus the replacements that could be placed.
func desiredReplicas(a meta.Assignment, r int, leaving leavingSet, nodes []placement.Node,
	racks map[string]string, load map[string]placement.Load) []string {
	reps := a.ReplicaSet()
	keep := slices.DeleteFunc(slices.Clone(reps), leaving)
	for _, inSync := range []bool{false, true} {
		for i := len(keep) - 1; i >= 0 && len(keep) > r; i-- {
			if id := keep[i]; id != a.Owner && slices.Contains(a.InSync(), id) == inSync {
				keep = slices.Delete(keep, i, i+1)
			}
		}
	}
	var added []string
	for len(keep) < r {
		picked, err := placement.ExtendReplicas(placement.ExtendSpec{Nodes: nodes, Keep: keep, Racks: racks,
			Exclude: reps, N: 1, Load: load})
		if err != nil {
			// Too few nodes: no replica leaves (it may be the last copy a decommission
			// waits on); the ones that could be placed still join.
			return append(slices.Clone(reps), added...)
		}
		keep, added = append(keep, picked...), append(added, picked...)
	}
	return keep
}

// nextStep is the one step that brings a closer to want, false when none applies now:
//
//	(a) want has nodes outside the replicas → add them (op 25; out of sync, the leader's
//	    expand adds them to the ISR once caught up);
//	(b) the replicas have nodes outside want, and every node of want is in the ISR → when the
//	    leader is not in want, move leadership to the first live in-sync node of want (op 24,
//	    reason reassign); otherwise drop them (op 25, the ISR cut to want);
//
// while a node of want is not yet in the ISR, the partition waits.
func (v *leaderView) nextStep(a meta.Assignment, want []string) (reassignStep, bool) {
	reps, isr := a.ReplicaSet(), a.InSync()
	s := reassignStep{Topic: a.Topic, Partition: a.Partition, Epoch: a.LeaderEpoch}
	var add []string
	for _, id := range want {
		if !slices.Contains(reps, id) {
			add = append(add, id)
		}
	}
	if len(add) > 0 {
		s.Kind, s.Replicas, s.ISR = stepAdd, append(slices.Clone(reps), add...), isr
		return s, len(s.Replicas) <= meta.MaxReplicaSet
	}
	if len(want) == 0 || len(want) == len(reps) {
		return s, false // want ⊆ reps here, so equal sizes mean the same set
	}
	for _, id := range want {
		if !slices.Contains(isr, id) {
			return s, false
		}
	}
	if !slices.Contains(want, a.Owner) {
		to := v.firstLive(want, a.Owner, isr)
		if to == "" {
			return s, false
		}
		s.Kind, s.From, s.To = stepLead, a.Owner, to
		return s, true
	}
	s.Kind, s.Replicas = stepDrop, want
	s.ISR = slices.DeleteFunc(slices.Clone(isr), func(id string) bool { return !slices.Contains(want, id) })
	return s, true
}
