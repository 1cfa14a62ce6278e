package placement

import (
	"fmt"
	"slices"
	"sort"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
)

// ErrNotEnoughMembers: R is larger than the nodes that may hold a replica (422).
var ErrNotEnoughMembers = errcode.ErrNotEnoughMembers

// Node is a member that may receive replicas, with its failure domain.
type Node struct {
	ID   string
	Rack string // "" = a rack of its own
}

// rack is n's failure-domain key; a node without a rack is its own domain, which never
// equals a named rack.
func (n Node) rack() string {
	if n.Rack == "" {
		return "\x00" + n.ID
	}
	return "r" + n.Rack
}

// Load is what a node already carries: replicas of any partition (leaders included) and
// the leaderships among them.
type Load struct {
	Replicas int
	Leaders  int
}

// ReplicaSpec is the input of PlaceReplicas.
type ReplicaSpec struct {
	Nodes []Node          // members that may receive replicas (see Nodes); IDs distinct
	R     int             // replicas per partition, 1 … meta.MaxReplicationFactor
	Parts []int           // the partitions to place, in placing order
	Load  map[string]Load // current load per node ID (absent = none); updated copies are used
	// Avoid lists, per partition, the nodes to keep off that partition where a balanced
	// alternative exists: a fan-out child's partition p avoids its parent's replicas of p.
	Avoid map[int][]string
}

// PlaceReplicas returns, for each partition of s.Parts (same order), its ordered replica
// list: replicas[0] is the preferred leader. It is deterministic and pure
// (docs/internals/replication.md §3):
//
//   - the R replicas of a partition are distinct nodes;
//   - while there are at least R racks they are on distinct racks; with fewer, each
//     replica goes to the rack this partition uses least (as even as the nodes allow);
//   - the leader is a node with the fewest leaders, then one outside Avoid[p], then the
//     fewest replicas; a follower is a node whose rack this partition uses least, then
//     with the fewest replicas, then one outside Avoid[p], then the one sharing the fewest
//     partitions (placed in this call) with the replicas already picked; ties break by ID.
//     Avoiding never costs the leader balance, nor a follower's replica balance.
//
// Each placement adds to the load the next partition sees, so leaders rotate evenly: from
// equal loads, leader counts differ by at most one (the leader rule comes first), and with
// every node its own rack replica counts by at most two. R above len(s.Nodes) is
// ErrNotEnoughMembers (wrapped); R outside 1…meta.MaxReplicationFactor or repeated node
// IDs are errcode.ErrInvalid.
func PlaceReplicas(s ReplicaSpec) ([][]string, error) {
	if s.R < 1 || s.R > meta.MaxReplicationFactor {
		return nil, fmt.Errorf("%w: replication factor %d not in 1…%d", errcode.ErrInvalid, s.R, meta.MaxReplicationFactor)
	}
	if s.R > len(s.Nodes) {
		return nil, fmt.Errorf("%w: replication factor %d, %d members can hold a replica", ErrNotEnoughMembers, s.R, len(s.Nodes))
	}
	nodes := slices.Clone(s.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	racks := map[string]bool{}
	for i, n := range nodes {
		if i > 0 && nodes[i-1].ID == n.ID {
			return nil, fmt.Errorf("%w: node %q listed twice", errcode.ErrInvalid, n.ID)
		}
		racks[n.rack()] = true
	}
	st := &placing{nodes: nodes, load: make(map[string]Load, len(nodes)), pairs: map[[2]string]int{},
		distinctRacks: len(racks) >= s.R}
	for _, n := range nodes {
		st.load[n.ID] = s.Load[n.ID]
	}
	out := make([][]string, 0, len(s.Parts))
	for _, p := range s.Parts {
		reps := st.placeOne(s.R, s.Avoid[p])
		st.add(reps)
		out = append(out, reps)
	}
	return out, nil
}

// placing is the state of one PlaceReplicas call: the nodes sorted by ID, the load so far,
// and how many partitions placed in this call each pair of nodes shares.
type placing struct {
	nodes         []Node
	load          map[string]Load
	pairs         map[[2]string]int // key: the two IDs, lower first
	distinctRacks bool              // at least R racks: one replica per rack
}

func pairKey(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// add counts a placed replica list into the load and the pair counts.
func (st *placing) add(reps []string) {
	for i, id := range reps {
		l := st.load[id]
		l.Replicas++
		if i == 0 {
			l.Leaders++
		}
		st.load[id] = l
		for _, other := range reps[:i] {
			st.pairs[pairKey(id, other)]++
		}
	}
}

// placeOne picks one partition's leader, then its followers. Among followers otherwise
// equal, the one sharing the fewest partitions with the replicas already picked comes
// first, so a node's partitions have their other copies on many nodes (a failure spreads
// its leaderships instead of moving them all to one node).
func (st *placing) placeOne(r int, avoid []string) []string {
	reps := make([]string, 0, r)
	perRack := map[string]int{} // replicas of this partition per rack
	for len(reps) < r {
		var best *Node
		var bestKey [4]int
		for i := range st.nodes {
			n := &st.nodes[i]
			if slices.Contains(reps, n.ID) || (st.distinctRacks && perRack[n.rack()] > 0) {
				continue
			}
			l := st.load[n.ID]
			key := [4]int{l.Leaders, avoided(avoid, n.ID), l.Replicas, 0}
			if len(reps) > 0 {
				shared := 0
				for _, id := range reps {
					shared += st.pairs[pairKey(id, n.ID)]
				}
				key = [4]int{perRack[n.rack()], l.Replicas, avoided(avoid, n.ID), shared}
			}
			// nodes are sorted by ID, so the first of equal keys is the lowest ID.
			if best == nil || less(key[:], bestKey[:]) {
				best, bestKey = n, key
			}
		}
		reps = append(reps, best.ID)
		perRack[best.rack()]++
	}
	return reps
}

func avoided(avoid []string, id string) int {
	if slices.Contains(avoid, id) {
		return 1
	}
	return 0
}

func less(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Nodes returns the members that may receive replicas: alive and not draining (the same
// rule as Candidates), with their racks, sorted by ID.
func Nodes(members []meta.Member) []Node {
	out := make([]Node, 0, len(members))
	for _, m := range members {
		if m.Status == meta.MemberAlive && !m.Draining {
			out = append(out, Node{ID: m.ID, Rack: m.Rack})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// LoadOf counts, per node, the replicas and leaderships of assignments (single-replica ones
// count their owner once as both).
func LoadOf(assignments []meta.Assignment) map[string]Load {
	out := map[string]Load{}
	for _, a := range assignments {
		for _, id := range a.ReplicaSet() {
			l := out[id]
			l.Replicas++
			if id == a.Owner {
				l.Leaders++
			}
			out[id] = l
		}
	}
	return out
}
