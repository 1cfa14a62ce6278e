package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

// commitResult is one CommitReplicated call's answer.
type commitResult struct {
	caller int
	n      int // records sent
	first  int64
	err    error
}

// startCommits starts n concurrent CommitReplicated calls to partition 0 while the test holds
// the produce lock, and returns once all of them wait in the partition's append group. Caller
// i sends i+1 records.
func startCommits(t *testing.T, f *fixture, n int) <-chan commitResult {
	t.Helper()
	return startCommitsWith(t, f, n, nil, func(recs []wal.Record) (int64, error) {
		return f.r.CommitReplicated(context.Background(), f.topic, 0, recs)
	})
}

// startCommitsWith starts n concurrent calls of commit one after the other, each once the
// previous one waits in partition 0's append group, and returns once all of them wait there.
// Caller i sends i+1 records; between (after each caller queued) runs after the i-th.
func startCommitsWith(t *testing.T, f *fixture, n int, between func(i int), commit func([]wal.Record) (int64, error)) <-chan commitResult {
	t.Helper()
	pt := f.r.Peek("t", 0)
	out := make(chan commitResult, n)
	for i := range n {
		go func() {
			recs := make([]wal.Record, i+1)
			for j := range recs {
				recs[j] = wal.Record{Payload: fmt.Appendf(nil, "c%d-%d", i, j)}
			}
			first, err := commit(recs)
			out <- commitResult{caller: i, n: i + 1, first: first, err: err}
		}()
		testwait.For(t, 5*time.Second, "the commit queued", func() bool {
			pt.group.mu.Lock()
			defer pt.group.mu.Unlock()
			return len(pt.group.queue) == i+1
		})
		if between != nil {
			between(i)
		}
	}
	return out
}

// fsyncs is the number of segment fsyncs partition t/0's log made.
func fsyncs(t testing.TB, f *fixture) uint64 {
	t.Helper()
	var m dto.Metric
	h := f.r.d.Metrics.StorageFsyncDuration.WithLabelValues("t", "0").(prometheus.Histogram)
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// collect reads n results.
func collect(t *testing.T, ch <-chan commitResult, n int) []commitResult {
	t.Helper()
	var out []commitResult
	for range n {
		select {
		case r := <-ch:
			out = append(out, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d commits answered", len(out), n)
		}
	}
	return out
}

// noneAnswered fails if a commit of ch answers within a short while.
func noneAnswered(t *testing.T, ch <-chan commitResult, why string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("caller %d answered %v (first %d) %s", r.caller, r.err, r.first, why)
	case <-time.After(50 * time.Millisecond):
	}
}

// Concurrent commits to one replicated partition go to disk as one append with one fsync;
// each caller returns only once the HWM passes its own records, with its own offsets.
func TestConcurrentReplicatedCommitsShareOneAppend(t *testing.T) {
	f, ld := leaderFixture(t, []string{"a", "b"}, 2)
	pt := f.r.Peek("t", 0)
	before := fsyncs(t, f)

	pt.LockCommits()
	const n = 6
	done := startCommits(t, f, n)
	pt.UnlockCommits()
	total := int64(n * (n + 1) / 2)
	testwait.For(t, 5*time.Second, "the group appended", func() bool { return pt.Log().NextOffset() == total })
	if got := fsyncs(t, f) - before; got != 1 {
		t.Fatalf("%d concurrent commits made %d fsyncs, want 1", n, got)
	}
	noneAnswered(t, done, "before the follower held the records")

	// A second group, appended after the first.
	pt.LockCommits()
	const m = 3
	done2 := startCommits(t, f, m)
	pt.UnlockCommits()
	total2 := total + int64(m*(m+1)/2)
	testwait.For(t, 5*time.Second, "the second group appended", func() bool { return pt.Log().NextOffset() == total2 })
	if got := fsyncs(t, f) - before; got != 2 {
		t.Fatalf("two groups made %d fsyncs, want 2", got)
	}

	// The follower holds the first group only: exactly its callers return.
	if err := ld.Fetched("b", 1, total); err != nil {
		t.Fatal(err)
	}
	first := collect(t, done, n)
	noneAnswered(t, done2, "before the HWM passed its records")
	if err := ld.Fetched("b", 1, total2); err != nil {
		t.Fatal(err)
	}
	second := collect(t, done2, m)

	// Each caller got its own offsets: the ranges tile [0, total2), each group its own part.
	checkTiles(t, first, 0, total)
	checkTiles(t, second, total, total2)
}

// checkTiles checks that the results' [first, first+n) ranges are disjoint and cover [from, to).
func checkTiles(t *testing.T, rs []commitResult, from, to int64) {
	t.Helper()
	slices.SortFunc(rs, func(a, b commitResult) int { return int(a.first - b.first) })
	next := from
	for _, r := range rs {
		if r.err != nil {
			t.Fatalf("caller %d: %v", r.caller, r.err)
		}
		if r.first != next {
			t.Fatalf("caller %d's records start at %d, want %d (results %+v)", r.caller, r.first, next, rs)
		}
		next += int64(r.n)
	}
	if next != to {
		t.Fatalf("results cover [%d, %d), want [%d, %d)", from, next, from, to)
	}
}

// A failed append fails exactly the callers whose batches were in it, with nothing appended;
// the next group commits.
func TestAFailedGroupAppendFailsExactlyItsCallers(t *testing.T) {
	t.Cleanup(faults.Reset)
	f, ld := leaderFixture(t, []string{"a", "b"}, 2)
	pt := f.r.Peek("t", 0)

	pt.LockCommits()
	const n = 4
	done := startCommits(t, f, n)
	faults.Set(plog.FaultBeforeFsync, errors.New("injected fsync failure"))
	pt.UnlockCommits()
	for _, r := range collect(t, done, n) {
		if !errors.Is(r.err, errcode.ErrUnavailable) {
			t.Fatalf("caller %d of the failed append: %v", r.caller, r.err)
		}
	}
	faults.Clear(plog.FaultBeforeFsync)
	if got := pt.Log().NextOffset(); got != 0 {
		t.Fatalf("a failed append left end offset %d", got)
	}

	pt.LockCommits()
	const m = 2
	done2 := startCommits(t, f, m)
	pt.UnlockCommits()
	testwait.For(t, 5*time.Second, "the next group appended", func() bool { return pt.Log().NextOffset() == 3 })
	if err := ld.Fetched("b", 1, 3); err != nil {
		t.Fatal(err)
	}
	checkTiles(t, collect(t, done2, m), 0, 3)
}

// A refusal under the produce lock (ISR below the minimum) refuses every batch of the group,
// nothing appended; the group is then done and later callers append again.
func TestARefusedGroupAppendsNothing(t *testing.T) {
	f, ld := leaderFixture(t, []string{"a"}, 2)
	pt := f.r.Peek("t", 0)
	pt.LockCommits()
	done := startCommits(t, f, 3)
	pt.UnlockCommits()
	for _, r := range collect(t, done, 3) {
		if !errors.Is(r.err, errcode.ErrNotEnoughReplicas) {
			t.Fatalf("caller %d below the minimum ISR: %v", r.caller, r.err)
		}
	}
	if got := pt.Log().NextOffset(); got != 0 {
		t.Fatalf("refused commits appended up to %d", got)
	}
	if err := ld.SetISR(1, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	pt.LockCommits()
	done = startCommits(t, f, 2)
	pt.UnlockCommits()
	testwait.For(t, 5*time.Second, "the next group appended", func() bool { return pt.Log().NextOffset() == 3 })
	if err := ld.Fetched("b", 1, 3); err != nil {
		t.Fatal(err)
	}
	checkTiles(t, collect(t, done, 2), 0, 3)
}

// Many callers committing at once, unsynchronised, all commit with disjoint offsets (the
// hand-off between appenders loses no batch).
func TestReplicatedCommitsUnderContention(t *testing.T) {
	f, _ := leaderFixture(t, []string{"a"}, 1)
	const n, rounds = 8, 25
	out := make(chan commitResult, n*rounds)
	for i := range n {
		go func() {
			for range rounds {
				first, err := f.r.CommitReplicated(context.Background(), f.topic, 0, []wal.Record{{Payload: []byte("x")}, {Payload: []byte("y")}})
				out <- commitResult{caller: i, n: 2, first: first, err: err}
			}
		}()
	}
	checkTiles(t, collect(t, out, n*rounds), 0, 2*n*rounds)
	pt := f.r.Peek("t", 0)
	pt.group.mu.Lock()
	defer pt.group.mu.Unlock()
	if pt.group.busy || len(pt.group.queue) != 0 {
		t.Fatalf("group left busy=%v with %d queued", pt.group.busy, len(pt.group.queue))
	}
}

// startUnreplicated starts n concurrent Commit calls to partition 0 of the fixture's
// unreplicated topic while the test holds the produce lock (startCommitsWith), stepping the
// clock a millisecond after each caller stamped its commit time.
func startUnreplicated(t *testing.T, f *fixture, n int) <-chan commitResult {
	t.Helper()
	return startCommitsWith(t, f, n, func(int) { f.step(time.Millisecond) }, func(recs []wal.Record) (int64, error) {
		return f.r.Commit(f.topic, 0, recs)
	})
}

// Concurrent commits to one unreplicated partition (several nodes' dispatchers, fan-out)
// go to disk as one log commit: one segment fsync, the records visible at once, each
// caller with its own offsets, all stamped with the latest caller's commit time.
func TestConcurrentCommitsShareOneLogCommit(t *testing.T) {
	f := newFixture(t)
	pt := f.get(t, 0)
	before := fsyncs(t, f)

	pt.LockCommits()
	const n = 6
	t0 := f.clock().UnixMilli()
	done := startUnreplicated(t, f, n)
	pt.UnlockCommits()
	total := int64(n * (n + 1) / 2)
	checkTiles(t, collect(t, done, n), 0, total)
	if got := fsyncs(t, f) - before; got != 1 {
		t.Fatalf("%d concurrent commits made %d fsyncs, want 1", n, got)
	}
	if h := pt.Log().HighWatermark(); h != total {
		t.Fatalf("HWM %d after the group, want %d", h, total)
	}
	if f.floored != 1 {
		t.Fatalf("RaiseFloor called %d times for one group, want 1", f.floored)
	}
	// The last caller stamped t0 + n-1 ms (the clock stepped after each queued).
	for o := range total {
		r, err := pt.Log().Read(o)
		if err != nil || r.CommittedAt != t0+n-1 {
			t.Fatalf("record %d: committed at %d (%v), want %d", o, r.CommittedAt, err, t0+n-1)
		}
	}

	// A lone commit after the group commits by itself.
	if first, err := f.r.Commit(f.topic, 0, batch("z")); err != nil || first != total {
		t.Fatalf("lone commit: %d, %v; want offset %d", first, err, total)
	}
}

// A freeze armed while commits wait for the produce lock refuses the whole group with
// nothing appended; a failed fsync fails exactly the callers whose batches were in it; the
// next group commits.
func TestARefusedOrFailedCommitGroupAppendsNothing(t *testing.T) {
	t.Cleanup(faults.Reset)
	f := newFixture(t)
	pt := f.get(t, 0)

	pt.LockCommits()
	done := startUnreplicated(t, f, 3)
	if !f.r.ArmFreeze(pt, "tok", time.Minute) { // lock order commitMu → shardMu holds
		t.Fatal("arm refused")
	}
	pt.UnlockCommits()
	for _, r := range collect(t, done, 3) {
		if !errors.Is(r.err, ErrFrozen) || !errors.Is(r.err, errcode.ErrUnavailable) {
			t.Fatalf("caller %d of the frozen group: %v", r.caller, r.err)
		}
	}
	if got := pt.Log().NextOffset(); got != 0 || f.floored != 0 {
		t.Fatalf("a refused group appended up to %d (floor raised %d times)", got, f.floored)
	}
	f.r.EndFreeze(pt, "tok", "test")

	pt.LockCommits()
	done = startUnreplicated(t, f, 4)
	faults.Set(plog.FaultBeforeFsync, errors.New("injected fsync failure"))
	pt.UnlockCommits()
	for _, r := range collect(t, done, 4) {
		if !errors.Is(r.err, errcode.ErrUnavailable) {
			t.Fatalf("caller %d of the failed commit: %v", r.caller, r.err)
		}
	}
	faults.Clear(plog.FaultBeforeFsync)
	if got := pt.Log().NextOffset(); got != 0 {
		t.Fatalf("a failed commit left end offset %d", got)
	}

	pt.LockCommits()
	done = startUnreplicated(t, f, 2)
	pt.UnlockCommits()
	checkTiles(t, collect(t, done, 2), 0, 3)
	if h := pt.Log().HighWatermark(); h != 3 {
		t.Fatalf("HWM %d after the last group, want 3", h)
	}
}

// Many callers committing to an unreplicated partition at once, unsynchronised, all commit
// with disjoint offsets and the group ends idle.
func TestCommitsUnderContention(t *testing.T) {
	f := newFixture(t)
	const n, rounds = 8, 25
	out := make(chan commitResult, n*rounds)
	for i := range n {
		go func() {
			for range rounds {
				first, err := f.r.Commit(f.topic, 0, batch("x", "y"))
				out <- commitResult{caller: i, n: 2, first: first, err: err}
			}
		}()
	}
	checkTiles(t, collect(t, out, n*rounds), 0, 2*n*rounds)
	pt := f.r.Peek("t", 0)
	if h := pt.Log().HighWatermark(); h != 2*n*rounds {
		t.Fatalf("HWM %d, want %d", h, 2*n*rounds)
	}
	pt.group.mu.Lock()
	defer pt.group.mu.Unlock()
	if pt.group.busy || len(pt.group.queue) != 0 {
		t.Fatalf("group left busy=%v with %d queued", pt.group.busy, len(pt.group.queue))
	}
}
