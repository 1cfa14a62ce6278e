package meta

import "slices"

// Replica sets of an assignment (docs/internals/replication.md §1): the accessors that apply
// the single-replica defaults, the canonical stored form, and the checks the ops share.

// Leader returns the partition's leader: the owner.
func (a Assignment) Leader() string { return a.Owner }

// ReplicaSet returns the partition's replicas, preferred leader first: the stored list, or
// [Owner] for a single-replica assignment (Replicas omitted). Callers must not modify it.
func (a Assignment) ReplicaSet() []string {
	if len(a.Replicas) == 0 {
		return a.single()
	}
	return a.Replicas
}

// InSync returns the partition's in-sync replicas, in replica order: the stored list, or
// [Owner] when ISR is omitted. Callers must not modify it.
func (a Assignment) InSync() []string {
	if len(a.ISR) == 0 {
		return a.single()
	}
	return a.ISR
}

func (a Assignment) single() []string {
	if a.Owner == "" {
		return nil
	}
	return []string{a.Owner}
}

// canonical returns a in its stored form: ISR in replica order, and Replicas and ISR omitted
// when both are just [Owner], so a single-replica record is stored byte for byte as it was
// before replica sets existed; a replica move target that is reached or no longer within the
// replicas is cleared (see Assignment).
func canonical(a Assignment) Assignment {
	reps := a.ReplicaSet()
	isr := inReplicaOrder(reps, a.InSync())
	if len(reps) == 1 && reps[0] == a.Owner && len(isr) == 1 && isr[0] == a.Owner {
		a.Replicas, a.ISR, a.TargetReplicas = nil, nil, nil
		return a
	}
	a.Replicas, a.ISR = slices.Clone(reps), isr
	if len(a.TargetReplicas) == 0 || slices.Equal(a.TargetReplicas, reps) || !subset(a.TargetReplicas, reps) {
		a.TargetReplicas = nil
	}
	return a
}

// MoveTarget returns the replica list a replica move in flight ends with, nil when none is
// (docs/internals/replication.md §9). Callers must not modify it.
func (a Assignment) MoveTarget() []string { return a.TargetReplicas }

// inReplicaOrder returns the members of set in the order of replicas (members not in
// replicas last, in their own order; the checks refuse such sets before they are stored).
func inReplicaOrder(replicas, set []string) []string {
	out := make([]string, 0, len(set))
	for _, r := range replicas {
		if slices.Contains(set, r) {
			out = append(out, r)
		}
	}
	for _, s := range set {
		if !slices.Contains(replicas, s) {
			out = append(out, s)
		}
	}
	return out
}

// validNodeList reports whether ids is a non-empty list of at most MaxReplicaSet distinct,
// valid node IDs.
func validNodeList(ids []string) bool {
	if len(ids) == 0 || len(ids) > MaxReplicaSet {
		return false
	}
	for i, id := range ids {
		if !validNodeID(id) || slices.Contains(ids[:i], id) {
			return false
		}
	}
	return true
}

// subset reports whether every member of sub is in set.
func subset(sub, set []string) bool {
	for _, s := range sub {
		if !slices.Contains(set, s) {
			return false
		}
	}
	return true
}

// sameSet reports whether a and b hold the same members (both are duplicate-free).
func sameSet(a, b []string) bool { return len(a) == len(b) && subset(a, b) }

// replicaInvariant returns the first invariant of Assignment that a (as stored) breaks, or
// "" when it holds. The ops check their inputs so that it always holds; the tests and the
// command fuzzer check every stored record with it.
func replicaInvariant(a Assignment) string {
	reps, isr := a.ReplicaSet(), a.InSync()
	switch {
	case !validNodeList(reps) || !validNodeList(isr):
		return "replicas or isr not distinct valid ids"
	case !slices.Contains(isr, a.Owner):
		return "owner not in the isr"
	case !subset(isr, reps):
		return "isr not within replicas"
	case len(a.Replicas) == 1 && a.Replicas[0] == a.Owner && len(a.ISR) <= 1:
		return "single replica not in canonical form"
	case !slices.Equal(isr, inReplicaOrder(reps, isr)):
		return "isr not in replica order"
	case len(a.TargetReplicas) > 0 && (!validNodeList(a.TargetReplicas) || !subset(a.TargetReplicas, reps) ||
		slices.Equal(a.TargetReplicas, reps)):
		return "move target not distinct ids within and unlike the replicas"
	}
	return ""
}
