package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
)

func nodes(spec ...string) []Node { // "id" or "id@rack"
	out := make([]Node, 0, len(spec))
	for _, s := range spec {
		n := Node{ID: s}
		for i := range len(s) {
			if s[i] == '@' {
				n = Node{ID: s[:i], Rack: s[i+1:]}
				break
			}
		}
		out = append(out, n)
	}
	return out
}

func TestPlaceReplicasTable(t *testing.T) {
	cases := []struct {
		name string
		spec ReplicaSpec
		want [][]string
	}{
		{"R=1 rotates over the nodes", ReplicaSpec{Nodes: nodes("a", "b", "c"), R: 1, Parts: Range(0, 4)},
			[][]string{{"a"}, {"b"}, {"c"}, {"a"}}},
		{"R=3 on three nodes: leaders rotate, every node holds every partition", ReplicaSpec{Nodes: nodes("c", "a", "b"), R: 3, Parts: Range(0, 3)},
			[][]string{{"a", "b", "c"}, {"b", "a", "c"}, {"c", "a", "b"}}},
		{"R=2 on four nodes: followers spread", ReplicaSpec{Nodes: nodes("a", "b", "c", "d"), R: 2, Parts: Range(0, 4)},
			[][]string{{"a", "b"}, {"c", "d"}, {"b", "c"}, {"d", "a"}}}, // no two nodes share two partitions
		{"racks: one replica per rack while there are R racks", ReplicaSpec{Nodes: nodes("a@z1", "b@z1", "c@z2", "d@z2", "e@z3"), R: 3, Parts: Range(0, 2)},
			[][]string{{"a", "c", "e"}, {"b", "d", "e"}}},
		{"fewer racks than R: as even as possible", ReplicaSpec{Nodes: nodes("a@z1", "b@z1", "c@z2", "d@z2"), R: 3, Parts: Range(0, 2)},
			[][]string{{"a", "c", "b"}, {"d", "a", "b"}}},
		{"a node without a rack is its own rack", ReplicaSpec{Nodes: nodes("a@z1", "b@z1", "c"), R: 2, Parts: Range(0, 3)},
			[][]string{{"a", "c"}, {"b", "c"}, {"c", "a"}}},
		{"existing load is respected", ReplicaSpec{Nodes: nodes("a", "b", "c"), R: 2, Parts: Range(0, 1),
			Load: map[string]Load{"a": {Replicas: 4, Leaders: 2}, "b": {Replicas: 4, Leaders: 2}}},
			[][]string{{"c", "a"}}},
		{"avoid the parent's replicas where balance allows", ReplicaSpec{Nodes: nodes("a", "b", "c", "d"), R: 2, Parts: Range(0, 2),
			Avoid: map[int][]string{0: {"a", "b"}, 1: {"c", "d"}}},
			[][]string{{"c", "d"}, {"a", "b"}}},
		{"avoidance gives way to balance", ReplicaSpec{Nodes: nodes("a", "b", "c"), R: 3, Parts: Range(0, 1),
			Avoid: map[int][]string{0: {"a", "b"}}},
			[][]string{{"c", "a", "b"}}},
		{"avoid never takes a leader above the fewest", ReplicaSpec{Nodes: nodes("a", "b"), R: 1, Parts: Range(0, 2),
			Load: map[string]Load{"b": {Replicas: 1, Leaders: 1}}, Avoid: map[int][]string{0: {"a"}}},
			[][]string{{"a"}, {"a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlaceReplicas(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("PlaceReplicas = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlaceReplicasRefusals(t *testing.T) {
	cases := []struct {
		name string
		spec ReplicaSpec
		want error
	}{
		{"R above the members", ReplicaSpec{Nodes: nodes("a", "b"), R: 3, Parts: Range(0, 1)}, ErrNotEnoughMembers},
		{"no members", ReplicaSpec{R: 1, Parts: Range(0, 1)}, ErrNotEnoughMembers},
		{"R 0", ReplicaSpec{Nodes: nodes("a"), R: 0}, errcode.ErrInvalid},
		{"R above 5", ReplicaSpec{Nodes: nodes("a", "b", "c", "d", "e", "f"), R: 6}, errcode.ErrInvalid},
		{"a node twice", ReplicaSpec{Nodes: nodes("a", "b", "a"), R: 2}, errcode.ErrInvalid},
	}
	for _, tc := range cases {
		if _, err := PlaceReplicas(tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if errcode.HTTPStatus(ErrNotEnoughMembers) != 422 {
		t.Error("not enough members must be a 422")
	}
}

func TestPlaceReplicasDoesNotChangeTheCallersLoad(t *testing.T) {
	load := map[string]Load{"a": {Replicas: 1, Leaders: 1}}
	if _, err := PlaceReplicas(ReplicaSpec{Nodes: nodes("a", "b"), R: 2, Parts: Range(0, 3), Load: load}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(load, map[string]Load{"a": {Replicas: 1, Leaders: 1}}) {
		t.Fatalf("load changed: %v", load)
	}
}

// Random clusters: every list is R distinct known nodes, on distinct racks while there are
// R racks (else as even as the rack sizes allow), and from equal loads leader counts differ
// by at most one and replica counts by at most two when every node is its own rack.
func TestPlaceReplicasProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 3))
	for iter := range 2000 {
		n := 1 + rng.IntN(12)
		rackCount := rng.IntN(5) // 0 = no racks
		var ns []Node
		for i := range n {
			nd := Node{ID: fmt.Sprintf("n%02d", i)}
			if rackCount > 0 {
				nd.Rack = fmt.Sprintf("z%d", rng.IntN(rackCount))
			}
			ns = append(ns, nd)
		}
		r := 1 + rng.IntN(min(n, meta.MaxReplicationFactor))
		parts := 1 + rng.IntN(meta.MaxPartitions)
		got, err := PlaceReplicas(ReplicaSpec{Nodes: ns, R: r, Parts: Range(0, parts)})
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkPlacement(t, iter, ns, r, parts, rackCount == 0, got)
	}
}

func checkPlacement(t *testing.T, iter int, ns []Node, r, parts int, ownRacks bool, got [][]string) {
	t.Helper()
	rackOf := map[string]string{}
	rackSize := map[string]int{}
	for _, n := range ns {
		rackOf[n.ID] = n.rack()
		rackSize[n.rack()]++
	}
	if len(got) != parts {
		t.Fatalf("iter %d: %d lists for %d partitions", iter, len(got), parts)
	}
	leaders, replicas := map[string]int{}, map[string]int{}
	for p, reps := range got {
		if len(reps) != r {
			t.Fatalf("iter %d p%d: %v is not %d replicas", iter, p, reps, r)
		}
		seen, perRack := map[string]bool{}, map[string]int{}
		for _, id := range reps {
			if _, ok := rackOf[id]; !ok || seen[id] {
				t.Fatalf("iter %d p%d: %v repeats or invents a node", iter, p, reps)
			}
			seen[id] = true
			perRack[rackOf[id]]++
			replicas[id]++
		}
		leaders[reps[0]]++
		if len(rackSize) >= r && len(perRack) != r {
			t.Fatalf("iter %d p%d: %v shares a rack with %d racks for R=%d", iter, p, reps, len(rackSize), r)
		}
		if even := (r + len(rackSize) - 1) / len(rackSize); allAtLeast(rackSize, even) {
			lo, hi := spread(perRack, rackSize)
			if hi-lo > 1 {
				t.Fatalf("iter %d p%d: %v spreads %d…%d over racks %v", iter, p, reps, lo, hi, rackSize)
			}
		}
	}
	if lo, hi := spread(leaders, rackOf); hi-lo > 1 {
		t.Fatalf("iter %d: leader counts %d…%d (%v)", iter, lo, hi, leaders)
	}
	if ownRacks {
		if lo, hi := spread(replicas, rackOf); hi-lo > 2 {
			t.Fatalf("iter %d: replica counts %d…%d (%v)", iter, lo, hi, replicas)
		}
	}
}

func allAtLeast(m map[string]int, n int) bool {
	for _, v := range m {
		if v < n {
			return false
		}
	}
	return true
}

// spread returns the lowest and highest count over every key of universe (absent = 0).
func spread[V any](counts map[string]int, universe map[string]V) (lo, hi int) {
	first := true
	for k := range universe {
		c := counts[k]
		if first || c < lo {
			lo = c
		}
		if first || c > hi {
			hi = c
		}
		first = false
	}
	return lo, hi
}

func TestLoadOfAndNodes(t *testing.T) {
	as := []meta.Assignment{
		{Owner: "a"},
		{Owner: "b", Replicas: []string{"a", "b", "c"}, ISR: []string{"a", "b"}},
	}
	want := map[string]Load{"a": {Replicas: 2, Leaders: 1}, "b": {Replicas: 1, Leaders: 1}, "c": {Replicas: 1}}
	if got := LoadOf(as); !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadOf = %v, want %v", got, want)
	}
	members := []meta.Member{
		{ID: "n2", Status: meta.MemberAlive, Rack: "z1"},
		{ID: "n1", Status: meta.MemberAlive},
		{ID: "n3", Status: meta.MemberDead, Rack: "z1"},
		{ID: "n4", Status: meta.MemberAlive, Draining: true},
	}
	if got, want := Nodes(members), []Node{{ID: "n1"}, {ID: "n2", Rack: "z1"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Nodes = %v, want %v", got, want)
	}
}
