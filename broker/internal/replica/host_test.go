package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
)

func TestHostFetchWaitsThenAnswersEmptyOrEarlyOnANewHWM(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 2, nil)
	h := NewHost()
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	ctx := context.Background()

	start := time.Now()
	rep, err := h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1}, 60*time.Millisecond)
	if err != nil || len(rep.Frames) != 0 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("idle fetch: %d bytes, %v after %v", len(rep.Frames), err, time.Since(start))
	}
	_, end := produce(t, a, ld, "x", 2)
	rep, err = h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1}, time.Minute)
	if err != nil || rep.Next != end {
		t.Fatalf("fetch with records: next %d, %v", rep.Next, err)
	}
	if _, err := b.log.AppendFrames(rep.Frames); err != nil {
		t.Fatal(err)
	}
	// The next fetch reports b's LEO, which commits the records: it answers at once, with the
	// new HWM, though there is nothing new to send.
	done := make(chan FetchReply, 1)
	go func() {
		rep, _ := h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1, Offset: end, HWM: 0}, time.Minute)
		done <- rep
	}()
	select {
	case rep := <-done:
		if rep.HWM != end {
			t.Fatalf("hwm %d, want %d", rep.HWM, end)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch behind the leader's HWM was held")
	}
	// Depose wakes a parked fetch, which then answers with the refusal.
	parked := make(chan error, 1)
	go func() {
		_, err := h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1, Offset: end, HWM: end}, time.Minute)
		parked <- err
	}()
	time.Sleep(30 * time.Millisecond)
	h.Drop("t", 0, ld)
	select {
	case err := <-parked:
		if !errors.Is(err, ErrDeposed) || !errors.Is(err, errcode.ErrNotOwner) {
			t.Fatalf("parked fetch after Drop: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drop did not wake a parked fetch")
	}
	if _, err := h.Fetch(ctx, "t", 0, "inc", FetchRequest{Epoch: 1}, 0); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("fetch after Drop: %v", err)
	}
}
