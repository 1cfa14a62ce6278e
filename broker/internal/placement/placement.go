// Package placement decides which member owns a new partition (docs/internals/metastore.md §12). It is
// pure: callers read members and assignments, call Place, and propose the result under the
// leader's placement lock (§7.2).
//
// Files: placement.go (the owner of a new single-replica partition), replicas.go (the
// ordered replica lists of replicated partitions: racks, leader rotation, follower spread;
// docs/internals/replication.md §3), rebalance.go (the move planner).
package placement

import (
	"sort"

	"narad.dev/broker/internal/meta"
)

// Candidates returns the IDs of the members that may receive new partitions: alive and not
// draining, sorted by ID (§7.1 rule 1).
func Candidates(members []meta.Member) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		if m.Status == meta.MemberAlive && !m.Draining {
			out = append(out, m.ID)
		}
	}
	sort.Strings(out)
	return out
}

// Parent is what placing a child topic needs to know about its parent.
type Parent struct {
	Partitions int            // the parent's partition count
	Owners     map[int]string // parent partition → current owner; absent = unassigned
}

// ParentOf builds a Parent from the parent topic's partition count and assignments.
func ParentOf(partitions int, assignments []meta.Assignment) *Parent {
	p := &Parent{Partitions: partitions, Owners: make(map[int]string, len(assignments))}
	for _, a := range assignments {
		p.Owners[a.Partition] = a.Owner
	}
	return p
}

// Place chooses an owner for each of topic's partitions in parts (§7.1):
//
//   - no candidates: nothing is placed (rule 4);
//   - no parent, or a child partition index ≥ the parent's count: candidates[p mod n] (rule 2);
//   - a child partition p < the parent's count: walking the ring of candidates from p, the
//     first one that does not own parent partition p (anti-affinity, rule 3); with a single
//     candidate that one, even if it owns the parent partition;
//   - a child partition whose parent partition is unassigned is returned in deferred, for a
//     later pass (C2) once the parent is placed.
//
// candidates must be sorted (see Candidates); out keeps the order of parts.
func Place(candidates []string, topic string, parts []int, parent *Parent) (out []meta.Assignment, deferred []int) {
	n := len(candidates)
	if n == 0 {
		return nil, nil
	}
	for _, p := range parts {
		if p < 0 {
			continue
		}
		if parent == nil || p >= parent.Partitions {
			out = append(out, meta.Assignment{Topic: topic, Partition: p, Owner: candidates[p%n]})
			continue
		}
		avoid, ok := parent.Owners[p]
		if !ok || avoid == "" {
			deferred = append(deferred, p)
			continue
		}
		owner := candidates[p%n]
		for i := range n {
			if c := candidates[(p+i)%n]; c != avoid {
				owner = c
				break
			}
		}
		out = append(out, meta.Assignment{Topic: topic, Partition: p, Owner: owner})
	}
	return out, deferred
}

// Range returns the partitions from, from+1, …, to-1 (a create places Range(0, n); a
// partition increase Range(old, new)).
func Range(from, to int) []int {
	out := make([]int, 0, max(to-from, 0))
	for p := from; p < to; p++ {
		out = append(out, p)
	}
	return out
}

// Missing returns the partitions below partitions that have no assignment in as.
func Missing(partitions int, as []meta.Assignment) []int {
	have := make(map[int]bool, len(as))
	for _, a := range as {
		have[a.Partition] = true
	}
	var out []int
	for p := range partitions {
		if !have[p] {
			out = append(out, p)
		}
	}
	return out
}
