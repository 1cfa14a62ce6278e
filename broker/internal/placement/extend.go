package placement

import (
	"fmt"
	"slices"
)

// ExtendSpec is the input of ExtendReplicas: grow one partition's replica set.
type ExtendSpec struct {
	Nodes   []Node            // members that may receive a replica (see Nodes)
	Keep    []string          // the replicas that stay, in order
	Racks   map[string]string // rack of every member ("" = its own domain), for Keep
	Exclude []string          // nodes never picked (the current replicas, leaving ones too)
	N       int               // replicas to add
	Load    map[string]Load   // current load per node; ExtendReplicas counts its picks in it
}

// ExtendReplicas picks s.N nodes to join a partition whose kept replicas are s.Keep
// (docs/internals/replication.md §9: re-replication, a raised replication factor, a
// decommission), each by the follower rule of PlaceReplicas: not kept, picked or excluded; a
// rack the partition uses least (a new rack while one is free); then fewest replicas; then
// lowest id. Each pick adds a replica to s.Load (so the next call sees it). Too few nodes is
// ErrNotEnoughMembers (wrapped); nothing is picked then.
func ExtendReplicas(s ExtendSpec) ([]string, error) {
	used := map[string]int{}
	for _, id := range s.Keep {
		used[Node{ID: id, Rack: s.Racks[id]}.rack()]++
	}
	var picked []string
	for range s.N {
		best := -1
		for i, n := range s.Nodes {
			if slices.Contains(s.Keep, n.ID) || slices.Contains(s.Exclude, n.ID) || slices.Contains(picked, n.ID) {
				continue
			}
			if best < 0 || extendBetter(n, s.Nodes[best], used, s.Load) {
				best = i
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%w: %d more replicas wanted, %d found", ErrNotEnoughMembers, s.N, len(picked))
		}
		n := s.Nodes[best]
		picked = append(picked, n.ID)
		used[n.rack()]++
	}
	for _, id := range picked {
		l := s.Load[id]
		l.Replicas++
		if s.Load != nil {
			s.Load[id] = l
		}
	}
	return picked, nil
}

// extendBetter ranks a over b: its rack less used by the partition, then fewer replicas,
// then lower id.
func extendBetter(a, b Node, used map[string]int, load map[string]Load) bool {
	if ua, ub := used[a.rack()], used[b.rack()]; ua != ub {
		return ua < ub
	}
	if la, lb := load[a.ID].Replicas, load[b.ID].Replicas; la != lb {
		return la < lb
	}
	return a.ID < b.ID
}
