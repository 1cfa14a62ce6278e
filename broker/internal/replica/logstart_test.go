package replica

import (
	"context"
	"errors"
	"testing"
	"time"
)

// hostSource reaches the leader through a Host, which turns a fetch below its log start into
// BelowLogStartError, as node RPC carries it.
type hostSource struct{ h *Host }

func (s hostSource) Fetch(ctx context.Context, req FetchRequest) (FetchReply, error) {
	return s.h.Fetch(ctx, "t", 0, "inc", req, 20*time.Millisecond)
}

func (s hostSource) EndOffset(ctx context.Context, leaderEpoch, epoch uint64) (uint64, int64, bool, error) {
	return s.h.EndOffset(ctx, "t", 0, "inc", leaderEpoch, epoch)
}

// A follower whose whole log lies below the leader's log start (retention removed the start of
// the leader's log) empties its log to begin at the leader's log start and catches up from
// there (docs/internals/replication.md §5): an empty follower, and one that fell behind.
func TestAFollowerBelowTheLeadersLogStartStartsThere(t *testing.T) {
	for _, behind := range []bool{false, true} {
		name := "Empty"
		if behind {
			name = "FellBehind"
		}
		t.Run(name, func(t *testing.T) {
			a, b := newNode(t, "a"), newNode(t, "b")
			ld := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, nil)
			h := NewHost()
			h.Lead("t", 0, "inc", ld, a.log, a.epochs)
			fw := &Follower{Self: "b", Epoch: 1, Log: b.log, Epochs: b.epochs, Source: hostSource{h: h},
				MaxBytes: 700}
			produce(t, a, ld, "x", 20)
			if behind {
				catchUp(t, fw, a)
			}
			for range 20 { // several segments
				produce(t, a, ld, "y", 20)
			}
			if _, err := a.log.ApplyRetention(int64(time.Hour/time.Millisecond), time.Now().Add(48*time.Hour)); err != nil {
				t.Fatal(err)
			}
			start := a.log.OldestOffset()
			if start <= b.log.NextOffset() {
				t.Fatalf("leader's log start %d, follower's end %d: the test needs the start past the end", start, b.log.NextOffset())
			}
			// The bare leader refuses the follower's offset.
			if _, err := h.Fetch(context.Background(), "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1,
				Offset: b.log.NextOffset()}, 0); !errors.As(err, new(*BelowLogStartError)) {
				t.Fatalf("fetch below the log start: %v", err)
			}

			catchUp(t, fw, a)
			if b.log.OldestOffset() != start || b.log.NextOffset() != a.log.NextOffset() {
				t.Fatalf("follower holds [%d, %d), leader [%d, %d)", b.log.OldestOffset(), b.log.NextOffset(),
					start, a.log.NextOffset())
			}
			for off := start; off < a.log.NextOffset(); off += 7 {
				ra, err := a.log.Read(off)
				if err != nil {
					t.Fatal(err)
				}
				rb, err := b.log.Read(off)
				if err != nil || string(ra.Key) != string(rb.Key) {
					t.Fatalf("offset %d: %q on the leader, %q on the follower (%v)", off, ra.Key, rb.Key, err)
				}
			}
			if got := b.epochs.Entries(); len(got) != 1 || got[0].Epoch != 1 || got[0].Start != start {
				t.Fatalf("follower's leader epochs %v, want epoch 1 from %d", got, start)
			}
			// The reset follower reconciles cleanly with its leader.
			if err := fw.Reconcile(context.Background()); err != nil || b.log.NextOffset() != a.log.NextOffset() {
				t.Fatalf("Reconcile = %v, end %d", err, b.log.NextOffset())
			}
		})
	}
}
