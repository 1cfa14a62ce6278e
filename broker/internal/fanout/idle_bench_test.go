package fanout

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
)

// Idle delay-cursor benchmark parameters (docs/internals/fanout.md §8: an idle delay child costs O(1)).
const (
	// idleWindow is the measured wall-clock window. It is fixed and independent of b.N: the
	// quantity measured is the cost of an idle cursor per unit of time, not per operation.
	idleWindow = 2 * time.Second
	// idleWakeCap replaces DueWakeCap (30 s) so the window holds a few wake-ups, each one a
	// ReadDue against the whole pending backlog: with the production cap the window would hold
	// no read at all and prove nothing about the cost of a wake-up.
	idleWakeCap = 500 * time.Millisecond
	// idleMaxReads bounds the ReadDue calls in the window: one per wake (window / cap), plus
	// slack for a wake straddling each edge of the window. A polling cursor reads thousands.
	idleMaxReads = int64(idleWindow/idleWakeCap) + 2
	// idleDelayMs is the child's delay: no record committed "now" is due during the benchmark.
	idleDelayMs = int64(time.Hour / time.Millisecond)
	// idleBatch is the records per parent commit (one frame each); setup is N / idleBatch
	// fsyncs. The cursor's resident memory holds the decoded head frame, so it is bounded by
	// this batch size, not by the backlog.
	idleBatch = 10_000
)

// timedLog wraps a ParentLog, counting ReadDue calls that returned and the time spent in them.
type timedLog struct {
	ParentLog
	reads  atomic.Int64
	readNs atomic.Int64
}

func (l *timedLog) ReadDue(from int64, n, b int, at int64) ([]plog.Record, int64, error) {
	t0 := time.Now()
	recs, notDueAt, err := l.ParentLog.ReadDue(from, n, b, at)
	l.readNs.Add(int64(time.Since(t0)))
	l.reads.Add(1)
	return recs, notDueAt, err
}

// BenchmarkIdleDelayCursor proves that an idle delay cursor costs the same with 1 and with
// 1,000,000 pending (not yet due) records: it reads up to the first record not due and sleeps
// until that record is due (capped), never polling the backlog. Each sub-benchmark measures one
// fixed window of wall time (idleWindow, independent of b.N) after the cursor settled, and
// reports the process CPU time (getrusage user+sys), the live-heap growth across the window
// (HeapAlloc after a GC at both ends), the bytes allocated in it (garbage included), the
// ReadDue calls and their mean duration, and the cursor's resident heap (after settling,
// versus before it started). It fails if any record was delivered early or if the cursor read
// more than once per wake-up.
func BenchmarkIdleDelayCursor(b *testing.B) {
	for _, n := range []int{1, 1_000_000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) { benchIdleDelayCursor(b, n) })
	}
}

func benchIdleDelayCursor(b *testing.B, pending int) {
	b.StopTimer()
	h := newFakeHost()
	dir := filepath.Join(b.TempDir(), "orders", "p00000")
	lg, err := plog.Open(dir, plog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	fillPending(b, lg, pending, time.Now().UnixMilli())
	tl := &timedLog{ParentLog: lg}
	h.set(func(h *fakeHost) {
		h.logs[0] = lg
		h.override = tl
		h.childParts["an"] = 1
		h.links["orders/an"] = epoch
		h.leader["orders/an"] = epoch
	})
	cfg := testConfig(h, nil)
	cfg.DueWakeCap = idleWakeCap
	d := Desired{Parent: "orders", Partition: 0, Child: "an", Epoch: epoch, AttachOffsets: []int64{0},
		DelayMs: idleDelayMs, Dir: dir}

	base := liveHeap()
	stop := runCursor(b, cfg, d)
	defer stop()
	settleDeadline := time.Now().Add(10 * time.Second)
	for tl.reads.Load() < 1 || !anchored(dir) {
		if time.Now().After(settleDeadline) {
			b.Fatal("delay cursor did not anchor and read within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	resident := liveHeap() - base

	heap0 := liveHeap()
	alloc0 := totalAlloc()
	r0, ns0 := tl.reads.Load(), tl.readNs.Load()
	cpu0 := cpuTime(b)
	b.StartTimer()
	time.Sleep(idleWindow) // the measurement itself: the cursor must stay asleep
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	reads, readNs := tl.reads.Load()-r0, tl.readNs.Load()-ns0
	alloc := totalAlloc() - alloc0
	heap := liveHeap() - heap0

	if got := len(h.all()); got != 0 {
		b.Fatalf("delivered %d records with none due (delay 1 h)", got)
	}
	if st, err := cursorfile.Read(context.Background(), cursorfile.Path(dir, "an")); err != nil || st.NextOffset != 0 {
		b.Fatalf("cursor file = %+v, %v; want next_offset 0 (nothing due)", st, err)
	}
	if reads > idleMaxReads {
		b.Fatalf("idle delay cursor read %d times in %v, want ≤ %d (sleep until due, capped at %v)",
			reads, idleWindow, idleMaxReads, idleWakeCap)
	}
	b.ReportMetric(float64(cpu)/float64(time.Millisecond), "cpu-ms/window")
	b.ReportMetric(float64(heap)/1024, "heap-KiB")
	b.ReportMetric(float64(alloc)/1024, "alloc-KiB/window")
	b.ReportMetric(float64(reads), "reads/window")
	if reads > 0 {
		b.ReportMetric(float64(readNs)/float64(reads)/1e3, "read-µs")
	}
	b.ReportMetric(float64(resident)/1024, "resident-KiB")
}

// fillPending commits n small keyless records stamped at, idleBatch per commit.
func fillPending(b *testing.B, lg *plog.Log, n int, at int64) {
	b.Helper()
	es := make([]plog.Entry, min(n, idleBatch))
	for i := range es {
		es[i] = plog.Entry{Payload: fmt.Appendf(nil, "m%07d", i)}
	}
	for done := 0; done < n; done += len(es) {
		if _, err := lg.Commit(es[:min(len(es), n-done)], at); err != nil {
			b.Fatal(err)
		}
	}
	if hwm := lg.HighWatermark(); hwm != int64(n) {
		b.Fatalf("parent hwm = %d, want %d", hwm, n)
	}
}

// runCursor runs one cursor for d; stop cancels it and waits for it to exit.
func runCursor(b *testing.B, cfg Config, d Desired) (stop func()) {
	c := &cursor{cfg: cfg, host: cfg.Host, obs: cfg.Observer, log: cfg.Logger, d: d, rr: new(atomic.Uint32)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("cursor exit: %v", err)
			}
		case <-time.After(10 * time.Second):
			b.Error("cursor did not stop")
		}
	}
}

// anchored reports whether the cursor file exists (the cursor passed its anchor).
func anchored(dir string) bool {
	_, err := cursorfile.Read(context.Background(), cursorfile.Path(dir, "an"))
	return err == nil || !errors.Is(err, cursorfile.ErrNotExist)
}

// liveHeap is HeapAlloc after a full collection: the bytes still reachable.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// totalAlloc is the cumulative bytes allocated so far (garbage included).
func totalAlloc() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc)
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
