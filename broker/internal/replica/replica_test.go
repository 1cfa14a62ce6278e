package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/log"
)

// node is one replica's partition: its log and leader-epoch file.
type node struct {
	id     string
	log    *log.Log
	epochs *log.Epochs
}

func newNode(t *testing.T, id string) *node {
	t.Helper()
	dir := t.TempDir()
	l, err := log.Open(dir, log.Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e, err := log.OpenEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &node{id: id, log: l, epochs: e}
}

// lead makes n the leader of epoch over replicas/isr.
func (n *node) lead(t *testing.T, epoch uint64, replicas, isr []string, minISR int, now func() time.Time) *Leader {
	t.Helper()
	if err := n.epochs.Assign(epoch, n.log.NextOffset()); err != nil {
		t.Fatal(err)
	}
	ld, err := NewLeader(LeaderConfig{Self: n.id, Epoch: epoch, Replicas: replicas, ISR: isr, MinISR: minISR, Log: n.log, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return ld
}

// produce appends entries on the leader's log, as the engine will.
func produce(t *testing.T, n *node, ld *Leader, tag string, count int) (first, end int64) {
	t.Helper()
	if err := ld.CanAppend(); err != nil {
		t.Fatalf("CanAppend: %v", err)
	}
	es := make([]log.Entry, count)
	for i := range es {
		es[i] = log.Entry{Key: []byte(fmt.Sprintf("%s-%d", tag, i)), Payload: bytes.Repeat([]byte(tag), 40)}
	}
	first, end, err := n.log.Append(es, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ld.Appended(); err != nil {
		t.Fatal(err)
	}
	return first, end
}

// direct is a Source that calls the leader in-process, with a short long-poll.
type direct struct {
	n  *node
	ld *Leader
}

func (s direct) Fetch(ctx context.Context, req FetchRequest) (FetchReply, error) {
	for {
		notify := s.n.log.NotifyC()
		rep, err := s.ld.Serve(req, s.n.log, s.n.epochs)
		if err != nil || len(rep.Frames) > 0 {
			return rep, err
		}
		select {
		case <-notify:
		case <-time.After(20 * time.Millisecond):
			return rep, nil
		case <-ctx.Done():
			return FetchReply{}, ctx.Err()
		}
	}
}

func (s direct) EndOffset(_ context.Context, leaderEpoch, epoch uint64) (uint64, int64, bool, error) {
	if leaderEpoch != s.ld.Epoch() {
		return 0, 0, false, ErrStaleEpoch
	}
	found, end, ok := s.n.epochs.EndOffsetFor(epoch, s.n.log.NextOffset())
	return found, end, ok, nil
}

func follow(f *node, leader *node, ld *Leader) *Follower {
	return &Follower{Self: f.id, Epoch: ld.Epoch(), Log: f.log, Epochs: f.epochs, Source: direct{n: leader, ld: ld}, MaxBytes: 700}
}

// catchUp fetches until f's LEO is the leader's and one more fetch reported it.
func catchUp(t *testing.T, fw *Follower, leader *node) {
	t.Helper()
	for range 1000 {
		if err := fw.FetchOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if fw.Log.NextOffset() == leader.log.NextOffset() {
			if err := fw.FetchOnce(context.Background()); err != nil { // reports the LEO
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("follower did not catch up")
}

// fakeClock is a clock for a Leader's Now that moves only by tick.
func fakeClock() (clock func() time.Time, tick func(time.Duration)) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tick = func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	return clock, tick
}

func sameRecords(t *testing.T, a, b *log.Log, from, to int64) {
	t.Helper()
	for off := from; off < to; off++ {
		x, err := a.Read(off)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		y, err := b.Read(off)
		if err != nil {
			t.Fatalf("read %d on the other replica: %v", off, err)
		}
		if !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Payload, y.Payload) {
			t.Fatalf("offset %d: %q vs %q", off, x.Key, y.Key)
		}
	}
}

func TestHWMIsTheLowestFsyncedEndOverTheISR(t *testing.T) {
	a, b, c := newNode(t, "a"), newNode(t, "b"), newNode(t, "c")
	all := []string{"a", "b", "c"}
	ld := a.lead(t, 1, all, all, 2, nil)
	_, end := produce(t, a, ld, "x", 5)
	if h := a.log.HighWatermark(); h != 0 {
		t.Fatalf("hwm %d before any follower fetched", h)
	}
	fb := follow(b, a, ld)
	catchUp(t, fb, a)
	if h := a.log.HighWatermark(); h != 0 {
		t.Fatalf("hwm %d while c, in the ISR, has nothing", h)
	}
	fc := follow(c, a, ld)
	catchUp(t, fc, a)
	if h := a.log.HighWatermark(); h != end {
		t.Fatalf("hwm %d, want %d once every ISR member holds the records", h, end)
	}
	if err := fb.FetchOnce(context.Background()); err != nil { // learns the HWM
		t.Fatal(err)
	}
	if h := b.log.HighWatermark(); h != end {
		t.Fatalf("follower hwm %d, want %d", h, end)
	}
	sameRecords(t, a.log, b.log, 0, end)

	// c leaves the ISR: the HWM no longer waits for it.
	_, end2 := produce(t, a, ld, "y", 3)
	catchUp(t, fb, a)
	if h := a.log.HighWatermark(); h != end {
		t.Fatalf("hwm %d moved without c", h)
	}
	if err := ld.SetISR(1, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if h := a.log.HighWatermark(); h != end2 {
		t.Fatalf("hwm %d after the shrink, want %d", h, end2)
	}
	if err := ld.WaitCommitted(context.Background(), end2); err != nil {
		t.Fatal(err)
	}
}

func TestBelowMinISRNothingCommits(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 2, nil)
	_, end := produce(t, a, ld, "x", 2)
	if err := ld.SetISR(1, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := ld.CanAppend(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("CanAppend with 1 of 2 in sync: %v", err)
	}
	if err := ld.WaitCommitted(context.Background(), end); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("WaitCommitted: %v", err)
	}
	catchUp(t, follow(b, a, ld), a)
	if h := a.log.HighWatermark(); h != 0 {
		t.Fatalf("hwm %d with an ISR below min", h)
	}
	if err := ld.SetISR(1, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if h := a.log.HighWatermark(); h != end {
		t.Fatalf("hwm %d after b rejoined, want %d", h, end)
	}
}

func TestWaitersWakeWhenCommittedOrDeposed(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 2, nil)
	_, end := produce(t, a, ld, "x", 2)
	done := make(chan error, 1)
	go func() { done <- ld.WaitCommitted(context.Background(), end) }()
	catchUp(t, follow(b, a, ld), a)
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	_, end = produce(t, a, ld, "y", 1)
	go func() { done <- ld.WaitCommitted(context.Background(), end) }()
	ld.Depose()
	if err := <-done; !errors.Is(err, ErrDeposed) {
		t.Fatalf("waiter after Depose: %v", err)
	}
	if err := ld.CanAppend(); !errors.Is(err, ErrDeposed) {
		t.Fatalf("CanAppend after Depose: %v", err)
	}
	if err := ld.Fetched("b", 1, end); !errors.Is(err, ErrDeposed) {
		t.Fatalf("fetch after Depose: %v", err)
	}
}

func TestCallsOfAnotherEpochOrNodeAreRefused(t *testing.T) {
	a := newNode(t, "a")
	ld := a.lead(t, 4, []string{"a", "b"}, []string{"a", "b"}, 1, nil)
	for _, e := range []uint64{3, 5} {
		if err := ld.Fetched("b", e, 0); !errors.Is(err, ErrStaleEpoch) {
			t.Errorf("fetch under epoch %d: %v", e, err)
		}
	}
	if err := ld.Fetched("z", 4, 0); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch by a non-replica: %v", err)
	}
	if err := ld.Fetched("b", 4, 1); !errors.Is(err, ErrFetchBeyondEnd) {
		t.Fatalf("fetch past the end: %v", err)
	}
}

func TestShrinkAndExpandCandidates(t *testing.T) {
	a := newNode(t, "a")
	clock, tick := fakeClock()
	ld := a.lead(t, 1, []string{"a", "b", "c"}, []string{"a", "b", "c"}, 2, clock)
	var end int64
	for range 3 {
		_, end = produce(t, a, ld, "x", 1) // a frame per record: every offset is a boundary
	}
	if got := ld.ShrinkCandidates(10 * time.Second); len(got) != 0 {
		t.Fatalf("shrink candidates at the start: %v", got)
	}
	tick(5 * time.Second)
	if err := ld.Fetched("b", 1, end); err != nil { // b caught up
		t.Fatal(err)
	}
	if err := ld.Fetched("c", 1, 1); err != nil { // c behind
		t.Fatal(err)
	}
	tick(6 * time.Second)
	if got := ld.ShrinkCandidates(10 * time.Second); len(got) != 1 || got[0] != "c" {
		t.Fatalf("shrink candidates: %v, want [c]", got)
	}
	// c fetches what was the leader's end at its previous fetch: caught up as of then.
	if err := ld.Fetched("c", 1, end); err != nil {
		t.Fatal(err)
	}
	if got := ld.ShrinkCandidates(10 * time.Second); len(got) != 0 {
		t.Fatalf("shrink candidates after c caught up: %v", got)
	}
	if err := ld.SetISR(1, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if got := ld.ExpandCandidates(10 * time.Second); len(got) != 1 || got[0] != "c" {
		t.Fatalf("expand candidates: %v, want [c] (its LEO %d ≥ HWM %d)", got, end, a.log.HighWatermark())
	}
	if lag := ld.Lag(); lag["b"] != 0 || lag["c"] != 0 {
		t.Fatalf("lag %v", lag)
	}
}

// A fetch that makes a follower due for an ISR change calls OnISRDue: one outside the ISR
// that caught up, one inside it that fetched below the HWM; at most once per ISRDueEvery for
// a follower, and never for one in sync.
func TestAFetchThatMakesAFollowerDueCallsOnISRDue(t *testing.T) {
	a := newNode(t, "a")
	clock, tick := fakeClock()
	if err := a.epochs.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	calls := 0
	ld, err := NewLeader(LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b", "c"}, ISR: []string{"a", "b"},
		MinISR: 2, Log: a.log, Now: clock, OnISRDue: func() { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for range 3 {
		_, end = produce(t, a, ld, "x", 1)
	}
	fetched := func(r string, off int64, wantCalls int, why string) {
		t.Helper()
		if err := ld.Fetched(r, 1, off); err != nil {
			t.Fatal(err)
		}
		if calls != wantCalls {
			t.Fatalf("%s: %d OnISRDue calls, want %d", why, calls, wantCalls)
		}
	}
	fetched("b", end, 0, "b in sync at the leader's end")
	fetched("c", 1, 0, "c outside the isr, below the hwm")
	fetched("c", end, 1, "c caught up")
	fetched("c", end, 1, "c again within ISRDueEvery")
	tick(ISRDueEvery)
	fetched("c", end, 2, "c still due a second later")
	if err := ld.SetISR(1, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	tick(ISRDueEvery)
	fetched("c", end, 2, "c in the isr at the hwm")
	fetched("b", 0, 3, "b in the isr, fetching below the hwm (it lost its copy)")
	fetched("b", 0, 3, "b again within ISRDueEvery")
}

// A follower that stopped fetching is not expanded back although its last fetch is at the HWM
// (the HWM cannot move while fewer than M are in sync): expanding it would have the next
// ShrinkCandidates drop it again, and the ISR would flap for as long as it is down.
func TestAStoppedFollowerAtTheHWMIsNotExpanded(t *testing.T) {
	a := newNode(t, "a")
	clock, tick := fakeClock()
	ld := a.lead(t, 1, []string{"a", "b", "c"}, []string{"a", "b", "c"}, 3, clock)
	_, end := produce(t, a, ld, "x", 1)
	for _, r := range []string{"b", "c"} {
		if err := ld.Fetched(r, 1, end); err != nil {
			t.Fatal(err)
		}
	}
	if h := a.log.HighWatermark(); h != end {
		t.Fatalf("hwm %d, want %d", h, end)
	}
	// b stops fetching; a record is appended that it never fetches.
	produce(t, a, ld, "y", 1)
	if err := ld.Fetched("c", 1, a.log.NextOffset()); err != nil {
		t.Fatal(err)
	}
	tick(11 * time.Second)
	if got := ld.ShrinkCandidates(10 * time.Second); !slices.Contains(got, "b") {
		t.Fatalf("shrink candidates %v, want b", got)
	}
	if err := ld.SetISR(1, []string{"a", "c"}); err != nil {
		t.Fatal(err)
	}
	if got := ld.ExpandCandidates(10 * time.Second); slices.Contains(got, "b") {
		t.Fatalf("expand candidates %v include b, which has not fetched for 11 s", got)
	}
	// b comes back and catches up: it is a candidate again.
	if err := ld.Fetched("b", 1, a.log.NextOffset()); err != nil {
		t.Fatal(err)
	}
	if got := ld.ExpandCandidates(10 * time.Second); !slices.Contains(got, "b") {
		t.Fatalf("expand candidates %v lack b after it caught up", got)
	}
}

// An ISR follower that fetches below the HWM lost its log (an empty data directory): it is a
// shrink candidate at once, not after the replica-lag time.
func TestAFollowerFetchingBelowTheHWMIsShrunkAtOnce(t *testing.T) {
	a := newNode(t, "a")
	ld := a.lead(t, 1, []string{"a", "b", "c"}, []string{"a", "b", "c"}, 2, nil)
	var end int64
	for range 3 {
		_, end = produce(t, a, ld, "x", 1)
	}
	for _, r := range []string{"b", "c"} {
		if err := ld.Fetched(r, 1, end); err != nil {
			t.Fatal(err)
		}
	}
	if hwm := a.log.HighWatermark(); hwm != end {
		t.Fatalf("hwm %d, want %d", hwm, end)
	}
	if got := ld.ShrinkCandidates(10 * time.Second); len(got) != 0 {
		t.Fatalf("shrink candidates with every follower caught up: %v", got)
	}
	if err := ld.Fetched("c", 1, 0); err != nil { // c came back empty
		t.Fatal(err)
	}
	if got := ld.ShrinkCandidates(10 * time.Second); len(got) != 1 || got[0] != "c" {
		t.Fatalf("shrink candidates after c fetched from 0 below the hwm %d: %v, want [c]", end, got)
	}
	if err := ld.Fetched("c", 1, end); err != nil { // copied it all again
		t.Fatal(err)
	}
	if got := ld.ShrinkCandidates(10 * time.Second); len(got) != 0 {
		t.Fatalf("shrink candidates after c caught up again: %v", got)
	}
}

// While an expand is proposed, the HWM waits for the joining replica too, so the metastore
// can never hold an ISR member that lacks a committed record.
func TestAProposedISRHoldsTheHWMBack(t *testing.T) {
	a := newNode(t, "a")
	ld := a.lead(t, 1, []string{"a", "b", "c"}, []string{"a", "b"}, 2, nil)
	var end int64
	for range 4 {
		_, end = produce(t, a, ld, "x", 1)
	}
	if err := ld.Fetched("c", 1, 2); err != nil {
		t.Fatal(err)
	}
	ld.ProposingISR([]string{"a", "b", "c"})
	if err := ld.Fetched("b", 1, end); err != nil {
		t.Fatal(err)
	}
	if h := a.log.HighWatermark(); h != 2 {
		t.Fatalf("hwm %d passed c's LEO 2 during the proposal", h)
	}
	if err := ld.ProposalFailed(); err != nil {
		t.Fatal(err)
	}
	if h := a.log.HighWatermark(); h != end {
		t.Fatalf("hwm %d after the proposal failed, want %d", h, end)
	}
}

// A deposed leader's unreplicated suffix is cut when it follows the new leader, and it then
// holds exactly the new leader's records.
func TestADeposedLeaderTruncatesItsDivergentSuffix(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld1 := a.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 1, nil)
	produce(t, a, ld1, "x", 5)
	catchUp(t, follow(b, a, ld1), a) // b holds [0, 5) of epoch 1, HWM 5
	_, aEnd := produce(t, a, ld1, "lost", 4)
	if aEnd != 9 || a.log.HighWatermark() != 5 {
		t.Fatalf("a: end %d hwm %d", aEnd, a.log.HighWatermark())
	}
	ld1.Depose()

	ld2 := b.lead(t, 2, []string{"a", "b"}, []string{"b"}, 1, nil)
	_, bEnd := produce(t, b, ld2, "new", 6)
	fa := follow(a, b, ld2)
	if err := fa.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.log.NextOffset() != 5 {
		t.Fatalf("a truncated to %d, want 5 (where epoch 1 ends on b)", a.log.NextOffset())
	}
	catchUp(t, fa, b)
	if err := fa.FetchOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.log.NextOffset() != bEnd || a.log.HighWatermark() != bEnd {
		t.Fatalf("a: next %d hwm %d, want %d", a.log.NextOffset(), a.log.HighWatermark(), bEnd)
	}
	sameRecords(t, a.log, b.log, 0, bEnd)
	if got := a.epochs.Entries(); len(got) != 2 || got[1] != (log.EpochEntry{Epoch: 2, Start: 5}) {
		t.Fatalf("a's epochs %v", got)
	}
}

// A replica that led an epoch the new leader never heard of drops all of it, then agrees on
// the older epoch.
func TestAnEpochTheLeaderNeverHadIsDroppedWhole(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ld1 := b.lead(t, 1, []string{"a", "b"}, []string{"a", "b"}, 1, nil)
	produce(t, b, ld1, "x", 3)
	catchUp(t, follow(a, b, ld1), b) // both hold epoch 1 [0, 3)
	ld1.Depose()
	// a led epoch 2 alone for a moment and appended two records nobody else has.
	ldA := a.lead(t, 2, []string{"a", "b"}, []string{"a"}, 2, nil)
	if _, _, err := a.log.Append([]log.Entry{{Payload: []byte("ghost")}, {Payload: []byte("ghost")}}, 1); err != nil {
		t.Fatal(err)
	}
	ldA.Depose()
	// b leads epoch 3.
	ld3 := b.lead(t, 3, []string{"a", "b"}, []string{"b"}, 1, nil)
	_, end := produce(t, b, ld3, "z", 2)
	fa := follow(a, b, ld3)
	if err := fa.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.log.NextOffset() != 3 {
		t.Fatalf("a truncated to %d, want 3", a.log.NextOffset())
	}
	catchUp(t, fa, b)
	sameRecords(t, a.log, b.log, 0, 3)
	if a.log.NextOffset() != end {
		t.Fatalf("a at %d, want %d", a.log.NextOffset(), end)
	}
}

func TestDivergenceBelowTheHWMIsNeverCut(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	ldA := a.lead(t, 1, []string{"a", "b"}, []string{"a"}, 1, nil)
	produce(t, a, ldA, "x", 4) // committed on a alone (HWM 4)
	ldA.Depose()
	// b, with nothing, is elected uncleanly under epoch 2.
	ldB := b.lead(t, 2, []string{"a", "b"}, []string{"b"}, 1, nil)
	produce(t, b, ldB, "y", 2)
	err := follow(a, b, ldB).Reconcile(context.Background())
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("reconcile across an unclean election: %v", err)
	}
	if a.log.NextOffset() != 4 {
		t.Fatalf("a was cut to %d", a.log.NextOffset())
	}
}

func TestEpochsCovering(t *testing.T) {
	all := []log.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 2, Start: 10}, {Epoch: 4, Start: 20}}
	cases := []struct {
		from, to int64
		want     []log.EpochEntry
	}{
		{0, 5, all[:1]},
		{5, 15, all[:2]},
		{10, 30, all[1:]},
		{25, 30, all[2:]},
	}
	for _, c := range cases {
		got := epochsCovering(all, c.from, c.to)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("[%d, %d): %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
