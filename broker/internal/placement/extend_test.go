package placement

import (
	"errors"
	"slices"
	"testing"
)

func TestExtendReplicasPicksAFreeRackThenTheLeastLoaded(t *testing.T) {
	nodes := []Node{{"a", "r1"}, {"b", "r2"}, {"c", "r1"}, {"d", "r3"}, {"e", "r3"}}
	racks := map[string]string{"a": "r1", "b": "r2", "c": "r1", "d": "r3", "e": "r3", "x": "r3"}
	load := map[string]Load{"d": {Replicas: 4}, "e": {Replicas: 1}}
	// a (r1) and b (r2) stay; x (dead, r3) leaves: r3 is free, e carries less than d.
	got, err := ExtendReplicas(ExtendSpec{Nodes: nodes, Keep: []string{"a", "b"}, Racks: racks,
		Exclude: []string{"a", "b", "x"}, N: 1, Load: load})
	if err != nil || !slices.Equal(got, []string{"e"}) {
		t.Fatalf("got %v, %v; want [e]", got, err)
	}
	if load["e"].Replicas != 2 {
		t.Fatalf("the pick is not counted: %+v", load)
	}
	// Two more for a alone: r2 (b) first, as b and e tie on rack use and b carries nothing;
	// then r3, where e (2) carries less than d (4).
	got, err = ExtendReplicas(ExtendSpec{Nodes: nodes, Keep: []string{"a"}, Racks: racks, N: 2, Load: load})
	if err != nil || !slices.Equal(got, []string{"b", "e"}) {
		t.Fatalf("got %v, %v; want [b e]", got, err)
	}
	// a, b and d kept use every rack once: c (r1) and e (r3) tie on rack use, c carries
	// nothing.
	got, err = ExtendReplicas(ExtendSpec{Nodes: nodes, Keep: []string{"a", "b", "d"}, Racks: racks, N: 1, Load: load})
	if err != nil || !slices.Equal(got, []string{"c"}) {
		t.Fatalf("got %v, %v; want [c]", got, err)
	}
}

func TestExtendReplicasNeedsEnoughNodes(t *testing.T) {
	nodes := []Node{{ID: "a"}, {ID: "b"}}
	_, err := ExtendReplicas(ExtendSpec{Nodes: nodes, Keep: []string{"a"}, Exclude: []string{"a"}, N: 2})
	if !errors.Is(err, ErrNotEnoughMembers) {
		t.Fatalf("err = %v, want ErrNotEnoughMembers", err)
	}
}
