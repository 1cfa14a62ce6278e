package replica

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A reassignment adds a replica to a running leadership: it may fetch, starts out of the ISR
// and becomes an expand candidate once caught up; a dropped replica can no longer fetch; a
// lower M lets the HWM move at once.
func TestReconfigureAddsAndForgetsReplicasAndChangesMinISR(t *testing.T) {
	a, c := newNode(t, "a"), newNode(t, "c")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 2, nil)
	_, end := produce(t, a, ld, "x", 3)
	if err := ld.SetISR(1, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := ld.Fetched("c", 1, 0); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by c before it joined: %v", err)
	}
	if err := ld.Reconfigure(1, []string{"a", "b", "c"}, 2); err != nil {
		t.Fatal(err)
	}
	if !ld.Configured([]string{"a", "b", "c"}, 2) || ld.Configured([]string{"a", "b"}, 2) {
		t.Fatal("Configured does not match the installed replicas")
	}
	catchUp(t, follow(c, a, ld), a)
	if got := ld.ExpandCandidates(10 * time.Second); !slices.Contains(got, "c") {
		t.Fatalf("expand candidates %v lack the caught-up newcomer", got)
	}
	if h := a.log.HighWatermark(); h != 0 {
		t.Fatalf("hwm %d with 1 in sync and M = 2", h)
	}
	if err := ld.Reconfigure(1, []string{"a", "c"}, 1); err != nil {
		t.Fatal(err)
	}
	if h := a.log.HighWatermark(); h != end {
		t.Fatalf("hwm %d after M fell to 1, want %d", h, end)
	}
	if err := ld.Fetched("b", 1, 0); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by the dropped b: %v", err)
	}
	for _, bad := range []struct {
		reps []string
		m    int
	}{{[]string{"b", "c"}, 1}, {[]string{"a", "c"}, 3}, {[]string{"a"}, 0}} {
		if err := ld.Reconfigure(1, bad.reps, bad.m); err == nil {
			t.Errorf("Reconfigure(%v, %d) accepted", bad.reps, bad.m)
		}
	}
	if err := ld.Reconfigure(2, []string{"a", "c"}, 1); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("another epoch: %v", err)
	}
}
