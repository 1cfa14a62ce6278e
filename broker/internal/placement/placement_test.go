package placement

import (
	"reflect"
	"testing"

	"narad.dev/broker/internal/meta"
)

func TestCandidatesAreAliveNonDrainingSortedByID(t *testing.T) {
	members := []meta.Member{
		{ID: "n3", Status: meta.MemberAlive},
		{ID: "n1", Status: meta.MemberAlive},
		{ID: "n2", Status: meta.MemberDead},
		{ID: "n4", Status: meta.MemberAlive, Draining: true},
		{ID: "n0", Status: meta.MemberAlive},
	}
	if got, want := Candidates(members), []string{"n0", "n1", "n3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Candidates = %v, want %v", got, want)
	}
	if got := Candidates(nil); got == nil || len(got) != 0 {
		t.Fatalf("Candidates(nil) = %#v, want empty", got)
	}
}

func owners(as []meta.Assignment) map[int]string {
	out := map[int]string{}
	for _, a := range as {
		out[a.Partition] = a.Owner
	}
	return out
}

func TestPlaceRules(t *testing.T) {
	three := []string{"a", "b", "c"}
	cases := []struct {
		name       string
		candidates []string
		parts      []int
		parent     *Parent
		want       map[int]string
		deferred   []int
	}{
		{name: "standalone: candidates[p mod n]", candidates: three, parts: Range(0, 5),
			want: map[int]string{0: "a", 1: "b", 2: "c", 3: "a", 4: "b"}},
		{name: "partition increase keeps p mod n", candidates: three, parts: Range(3, 5),
			want: map[int]string{3: "a", 4: "b"}},
		{name: "no candidates: nothing placed, nothing deferred", candidates: nil, parts: Range(0, 3),
			want: map[int]string{}},
		{name: "child avoids the parent partition's owner (CL-13)", candidates: three, parts: Range(0, 3),
			parent: ParentOf(3, []meta.Assignment{{Partition: 0, Owner: "a"}, {Partition: 1, Owner: "b"}, {Partition: 2, Owner: "c"}}),
			want:   map[int]string{0: "b", 1: "c", 2: "a"}},
		{name: "child keeps p mod n when it already differs", candidates: three, parts: Range(0, 3),
			parent: ParentOf(3, []meta.Assignment{{Partition: 0, Owner: "c"}, {Partition: 1, Owner: "a"}, {Partition: 2, Owner: "b"}}),
			want:   map[int]string{0: "a", 1: "b", 2: "c"}},
		{name: "child ring walk wraps around", candidates: []string{"a", "b"}, parts: []int{1},
			parent: ParentOf(2, []meta.Assignment{{Partition: 1, Owner: "b"}}),
			want:   map[int]string{1: "a"}},
		{name: "child with one candidate uses it anyway", candidates: []string{"a"}, parts: Range(0, 2),
			parent: ParentOf(2, []meta.Assignment{{Partition: 0, Owner: "a"}, {Partition: 1, Owner: "a"}}),
			want:   map[int]string{0: "a", 1: "a"}},
		{name: "parent owner no longer a candidate: p mod n", candidates: three, parts: []int{0},
			parent: ParentOf(1, []meta.Assignment{{Partition: 0, Owner: "gone"}}),
			want:   map[int]string{0: "a"}},
		{name: "child partition beyond the parent's count is standalone", candidates: three, parts: Range(2, 5),
			parent: ParentOf(2, []meta.Assignment{{Partition: 0, Owner: "a"}, {Partition: 1, Owner: "b"}}),
			want:   map[int]string{2: "c", 3: "a", 4: "b"}},
		{name: "child partition with an unassigned parent partition is deferred", candidates: three, parts: Range(0, 3),
			parent: ParentOf(3, []meta.Assignment{{Partition: 0, Owner: "a"}, {Partition: 2, Owner: "a"}}),
			want:   map[int]string{0: "b", 2: "c"}, deferred: []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, deferred := Place(c.candidates, "kid", c.parts, c.parent)
			if got := owners(out); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("owners = %v, want %v", got, c.want)
			}
			if !reflect.DeepEqual(deferred, c.deferred) {
				t.Fatalf("deferred = %v, want %v", deferred, c.deferred)
			}
			for _, a := range out {
				if a.Topic != "kid" || a.Target != "" {
					t.Fatalf("assignment %+v: wrong topic or a target set", a)
				}
			}
		})
	}
}

// CL-13 over many shapes: with ≥ 2 candidates a child partition never shares its parent
// partition's owner.
func TestChildNeverSharesParentOwnerWithTwoOrMoreCandidates(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e"}
	for n := 2; n <= len(all); n++ {
		cands := all[:n]
		for parts := 1; parts <= 12; parts++ {
			parentAs, _ := Place(cands, "parent", Range(0, parts), nil)
			out, deferred := Place(cands, "kid", Range(0, parts+2), ParentOf(parts, parentAs))
			if len(deferred) != 0 || len(out) != parts+2 {
				t.Fatalf("n=%d parts=%d: placed %d, deferred %v", n, parts, len(out), deferred)
			}
			for _, a := range out {
				if a.Partition < parts && a.Owner == parentAs[a.Partition].Owner {
					t.Fatalf("n=%d parts=%d: child p%d on the parent's owner %s", n, parts, a.Partition, a.Owner)
				}
			}
		}
	}
}

func TestMissingListsUnassignedPartitions(t *testing.T) {
	as := []meta.Assignment{{Partition: 0}, {Partition: 2}, {Partition: 7}}
	if got, want := Missing(4, as), []int{1, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Missing = %v, want %v", got, want)
	}
	if got := Missing(1, []meta.Assignment{{Partition: 0}}); len(got) != 0 {
		t.Fatalf("Missing of a fully assigned topic = %v", got)
	}
}
