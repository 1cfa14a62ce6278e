package replica

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/testwait"
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
	// The next fetch reports b's LEO, which commits the records: it answers with the new HWM,
	// though there is nothing new to send, once the linger for records to send with it ends.
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

// The consumer state goes to each follower at most once per ConsumerStateSync, and only when
// it changed since that follower last got it; the follower hands it to OnConsumerState.
func TestConsumerStateReachesFollowersOncePerSyncWhenChanged(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	now := time.Unix(1000, 0)
	var state []byte
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if err := a.epochs.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	ld, err := NewLeader(LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b"}, ISR: []string{"a", "b"},
		MinISR: 1, Log: a.log, Now: clock, State: func() []byte { mu.Lock(); defer mu.Unlock(); return state }})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	fw := &Follower{Self: "b", Epoch: 1, Log: b.log, Epochs: b.epochs, Source: direct{n: a, ld: ld},
		OnConsumerState: func(s []byte) error { got = append(got, s); return nil }}
	fetch := func() {
		t.Helper()
		if err := fw.FetchOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	set := func(s string, d time.Duration) { mu.Lock(); state, now = []byte(s), now.Add(d); mu.Unlock() }

	fetch() // no state yet
	set("s1", 0)
	fetch() // considered less than a second ago: not yet
	set("s1", time.Second)
	fetch() // due and new
	set("s1", time.Second)
	fetch() // due but unchanged
	set("s2", 100*time.Millisecond)
	fetch() // changed but not due
	set("s2", time.Second)
	fetch() // due and changed
	if len(got) != 2 || string(got[0]) != "s1" || string(got[1]) != "s2" {
		t.Fatalf("follower got %q, want [s1 s2]", got)
	}
}

// The fan-out cursors go with the consumer state's cadence, each deduplicated on its own: a
// change of one is sent without the other; the follower hands them to OnFanoutCursors.
func TestFanoutCursorsReachFollowersOncePerSyncWhenChanged(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	now := time.Unix(1000, 0)
	var state, cursors []byte
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if err := a.epochs.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	ld, err := NewLeader(LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b"}, ISR: []string{"a", "b"},
		MinISR: 1, Log: a.log, Now: clock,
		State:   func() []byte { mu.Lock(); defer mu.Unlock(); return state },
		Cursors: func() []byte { mu.Lock(); defer mu.Unlock(); return cursors }})
	if err != nil {
		t.Fatal(err)
	}
	var gotState, gotCursors []string
	fw := &Follower{Self: "b", Epoch: 1, Log: b.log, Epochs: b.epochs, Source: direct{n: a, ld: ld},
		OnConsumerState: func(s []byte) error { gotState = append(gotState, string(s)); return nil },
		OnFanoutCursors: func(c []byte) error { gotCursors = append(gotCursors, string(c)); return nil }}
	fetch := func() {
		t.Helper()
		if err := fw.FetchOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	set := func(s, c string, d time.Duration) {
		mu.Lock()
		state, cursors, now = []byte(s), []byte(c), now.Add(d)
		mu.Unlock()
	}

	set("s1", "c1", time.Second)
	fetch() // both due and new
	set("s1", "c2", 100*time.Millisecond)
	fetch() // cursors changed, not due
	set("s1", "c2", time.Second)
	fetch() // due: only the cursors changed
	set("s2", "c2", time.Second)
	fetch() // due: only the state changed
	if !slices.Equal(gotState, []string{"s1", "s2"}) || !slices.Equal(gotCursors, []string{"c1", "c2"}) {
		t.Fatalf("follower got state %q and cursors %q, want [s1 s2] and [c1 c2]", gotState, gotCursors)
	}

	// A parked fetch answers early when cursors are due, like the consumer state.
	h := NewHost()
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	set("s2", "c3", time.Second)
	rep, err := h.Fetch(context.Background(), "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1}, time.Minute)
	if err != nil || string(rep.FanoutCursors) != "c3" || rep.ConsumerState != nil {
		t.Fatalf("parked fetch: cursors %q, state %q, %v", rep.FanoutCursors, rep.ConsumerState, err)
	}
}

// A follower whose LEO goes back within one epoch lost its copy (a wiped data directory):
// the consumer state and cursors it was sent go to it again when next due, changed or not.
func TestAFollowerThatLostItsCopyIsSentTheStateAgain(t *testing.T) {
	a := newNode(t, "a")
	now := time.Unix(1000, 0)
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, func() time.Time { return now })
	ld.state = func() []byte { return []byte("s") }
	ld.cursors = func() []byte { return []byte("c") }
	_, end := produce(t, a, ld, "x", 3)
	serve := func(offset int64) FetchReply {
		t.Helper()
		now = now.Add(time.Second)
		rep, err := ld.Serve(FetchRequest{Follower: "b", Epoch: 1, Offset: offset, MaxBytes: 1 << 20}, a.log, a.epochs)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := serve(end); string(rep.ConsumerState) != "s" || string(rep.FanoutCursors) != "c" {
		t.Fatalf("first answer: state %q cursors %q", rep.ConsumerState, rep.FanoutCursors)
	}
	if rep := serve(end); rep.ConsumerState != nil || rep.FanoutCursors != nil {
		t.Fatalf("unchanged state sent again: %q %q", rep.ConsumerState, rep.FanoutCursors)
	}
	if rep := serve(0); string(rep.ConsumerState) != "s" || string(rep.FanoutCursors) != "c" {
		t.Fatalf("after the follower lost its copy: state %q cursors %q", rep.ConsumerState, rep.FanoutCursors)
	}
}

// TestHostFetchSendsANewHWMWithTheRecordsThatFollowIt: a parked fetch whose only news is a
// newer HWM waits up to the linger for records, and answers both at once; with none, the HWM
// comes alone when the linger ends.
func TestHostFetchSendsANewHWMWithTheRecordsThatFollowIt(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 2, nil)
	h := NewHost()
	h.hwmLinger = time.Minute
	h.Lead("t", 0, "inc", ld, a.log, a.epochs)
	ctx := context.Background()
	_, end := produce(t, a, ld, "x", 2)
	rep, err := h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1}, time.Minute)
	if err != nil || rep.Next != end {
		t.Fatalf("fetch with records: next %d, %v", rep.Next, err)
	}
	if _, err := b.log.AppendFrames(rep.Frames); err != nil {
		t.Fatal(err)
	}
	done := make(chan FetchReply, 1)
	go func() { // reports b's LEO: the HWM moves to end, and the fetch lingers
		rep, _ := h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1, Offset: end, HWM: 0}, time.Minute)
		done <- rep
	}()
	testwait.For(t, 10*time.Second, "the HWM to move", func() bool { return a.log.HighWatermark() == end })
	select {
	case rep := <-done:
		t.Fatalf("answered with the HWM alone (%d bytes, hwm %d) before the linger ended", len(rep.Frames), rep.HWM)
	case <-time.After(50 * time.Millisecond):
	}
	_, next := produce(t, a, ld, "y", 3)
	select {
	case rep := <-done:
		if rep.HWM != end || rep.Next != next || len(rep.Frames) == 0 {
			t.Fatalf("answer: hwm %d next %d with %d bytes; want hwm %d and the records to %d", rep.HWM, rep.Next,
				len(rep.Frames), end, next)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("records appended during the linger were not sent")
	}

	h.hwmLinger = 30 * time.Millisecond
	if _, err := b.log.AppendFrames(mustFrames(t, a, end)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err = h.Fetch(ctx, "t", 0, "inc", FetchRequest{Follower: "b", Epoch: 1, Offset: next, HWM: end}, time.Minute)
	if err != nil || rep.HWM != next || len(rep.Frames) != 0 {
		t.Fatalf("HWM-only answer: hwm %d, %d bytes, %v; want hwm %d", rep.HWM, len(rep.Frames), err, next)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the HWM alone waited %v, not the linger", waited)
	}
}

// mustFrames reads n's frames from off to its end.
func mustFrames(t *testing.T, n *node, off int64) []byte {
	t.Helper()
	frames, _, err := n.log.ReadFrames(off, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}
