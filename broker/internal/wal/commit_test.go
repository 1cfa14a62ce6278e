package wal

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/testwait"
)

// PC-1: an Append succeeds only after its fsync; an fsync/write failure is reported to the
// caller and the WAL fails closed.
func TestAppendFailsWhenFsyncOrWriteFails(t *testing.T) {
	for _, point := range []string{"wal.fsync", "wal.write", "wal.before_fsync"} {
		t.Run(point, func(t *testing.T) {
			resetFaults(t)
			w := openT(t, t.TempDir(), Options{})
			appendN(t, w, 0, 2)
			faults.Set(point, nil)
			_, err := w.Append(context.Background(), testRecord(2))
			if !errors.Is(err, ErrFailed) || !errors.Is(err, faults.ErrInjected) {
				t.Fatalf("Append with %s armed = %v, want ErrFailed wrapping the cause", point, err)
			}
			if got := w.NextSeq(); got != 2 {
				t.Fatalf("NextSeq = %d after a failed batch, want 2", got)
			}
			faults.Reset()
			// Fail closed: no later batch may claim the failed bytes are durable.
			if _, err := w.Append(context.Background(), testRecord(3)); !errors.Is(err, ErrFailed) {
				t.Fatalf("Append after failure = %v, want ErrFailed", err)
			}
			if !w.Stats().Failed {
				t.Fatalf("Stats().Failed = false after a failed fsync")
			}
		})
	}
}

func TestAppendFailureReachesEveryCallerOfTheBatch(t *testing.T) {
	resetFaults(t)
	w := openT(t, t.TempDir(), Options{})
	release := make(chan struct{})
	w.beforeWrite = func() { <-release }
	faults.Set("wal.fsync", nil)
	const callers = 8
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			_, err := w.Append(context.Background(), testRecord(i))
			errs <- err
		}()
	}
	testwait.For(t, 10*time.Second, "all callers staged", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.nextSeq == callers
	})
	close(release)
	for range callers {
		if err := <-errs; !errors.Is(err, ErrFailed) {
			t.Fatalf("caller got %v, want ErrFailed", err)
		}
	}
}

func startCrashChild(t *testing.T, dir, faultSpec string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	if faultSpec != "" {
		cmd.Env = append(cmd.Env, "NARAD_FAULTS="+faultSpec)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(out)
}

func assertReplayed(t *testing.T, dir string, seq uint64) {
	t.Helper()
	w := openT(t, dir, Options{})
	es, err := w.ReadFrom(seq, 10)
	if err != nil || len(es) != 1 || !sameRecord(es[0].Record, testRecord(77)) {
		t.Fatalf("after kill -9: ReadFrom(%d) = %+v, %v; want the appended record", seq, es, err)
	}
}

// PC-1: kill -9 right after a successful Append → the record replays after reopen.
func TestAppendedRecordSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startCrashChild(t, dir, "")
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "appended ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	seq, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "appended ")), 10, 64)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	assertReplayed(t, dir, seq)
}

// PC-1: a crash after the fsync but before the caller is released still leaves the record
// durable (the client never saw 202; replaying it is within at-least-once).
func TestRecordFsyncedBeforeCrashAtAfterFsyncReplays(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startCrashChild(t, dir, "wal.after_fsync=crash")
	line, _ := out.ReadString('\n')
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != -1 || line != "" {
		t.Fatalf("child should die by SIGKILL before answering: err %v, output %q", err, line)
	}
	assertReplayed(t, dir, 0)
}

// PC-2: concurrent Appends share one write + fdatasync per batch.
func TestConcurrentAppendsShareOneFsync(t *testing.T) {
	obs := &syncCounter{}
	w := openT(t, t.TempDir(), Options{Observer: obs})
	// Hold the first batch's write until all callers are staged, so the count is deterministic:
	// batch 1 holds whatever was staged first, batch 2 everything else.
	release := make(chan struct{})
	var once sync.Once
	w.beforeWrite = func() { once.Do(func() { <-release }) }
	const callers = 100
	var wg sync.WaitGroup
	seqs := make([]uint64, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq, err := w.Append(context.Background(), testRecord(i))
			if err != nil {
				t.Errorf("Append: %v", err)
			}
			seqs[i] = seq
		}()
	}
	testwait.For(t, 10*time.Second, "all callers staged", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.nextSeq == callers
	})
	close(release)
	wg.Wait()
	if got := obs.syncs.Load(); got > 3 {
		t.Fatalf("%d fsyncs for %d concurrent appends, want ≤ 3", got, callers)
	}
	if got := obs.records.Load(); got != callers {
		t.Fatalf("observer saw %d records, want %d", got, callers)
	}
	if w.NextSeq() != callers {
		t.Fatalf("NextSeq = %d, want %d", w.NextSeq(), callers)
	}
	es, err := w.ReadFrom(0, callers)
	if err != nil || len(es) != callers {
		t.Fatalf("ReadFrom: %d entries, %v", len(es), err)
	}
	for i, seq := range seqs {
		if !sameRecord(es[seq].Record, testRecord(i)) {
			t.Fatalf("caller %d got seq %d holding another record", i, seq)
		}
	}
}

// PC-3: once staged, Append ignores ctx cancellation and returns the real outcome.
func TestStagedAppendIgnoresContextCancel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   bool
		wantErr error
	}{
		{"durable outcome", false, nil},
		{"failed outcome", true, ErrFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resetFaults(t)
			w := openT(t, t.TempDir(), Options{})
			release := make(chan struct{})
			w.beforeWrite = func() { <-release }
			if tc.fault {
				faults.Set("wal.fsync", nil)
			}
			ctx, cancel := context.WithCancel(context.Background())
			type result struct {
				seq uint64
				err error
			}
			done := make(chan result, 1)
			go func() {
				seq, err := w.Append(ctx, testRecord(5))
				done <- result{seq, err}
			}()
			testwait.For(t, 10*time.Second, "record staged", func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.nextSeq == 1
			})
			cancel()
			close(release)
			r := <-done
			if tc.wantErr == nil {
				if r.err != nil || r.seq != 0 || w.NextSeq() != 1 {
					t.Fatalf("Append = %d, %v; want the durable seq 0 despite the cancel", r.seq, r.err)
				}
				return
			}
			if !errors.Is(r.err, tc.wantErr) || errors.Is(r.err, context.Canceled) {
				t.Fatalf("Append = %v, want %v (not the ctx error)", r.err, tc.wantErr)
			}
		})
	}
}

func TestAppendWithCancelledContextStagesNothing(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Append(ctx, testRecord(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v, want context.Canceled", err)
	}
	appendN(t, w, 0, 1)
	if w.NextSeq() != 1 {
		t.Fatalf("NextSeq = %d, want 1 (the cancelled append took no seq)", w.NextSeq())
	}
}

func TestOneAppendGetsConsecutiveSeqsInOneBatch(t *testing.T) {
	obs := &syncCounter{}
	w := openT(t, t.TempDir(), Options{Observer: obs})
	var wg sync.WaitGroup
	firsts := make([]uint64, 8)
	for g := range firsts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			firsts[g] = appendN(t, w, g*50, 50)
		}()
	}
	wg.Wait()
	for g, first := range firsts {
		es, err := w.ReadFrom(first, 50)
		if err != nil || len(es) != 50 {
			t.Fatalf("ReadFrom(%d): %d, %v", first, len(es), err)
		}
		checkEntries(t, es, first, func(seq uint64) int { return g*50 + int(seq-first) })
	}
	if obs.syncs.Load() > int64(len(firsts)) {
		t.Fatalf("%d syncs for %d appends", obs.syncs.Load(), len(firsts))
	}
}

func TestAppendRejectsOversizedRecordAtomically(t *testing.T) {
	w := openT(t, t.TempDir(), Options{MaxRecordBytes: 200})
	big := testRecord(1)
	big.Payload = make([]byte, 300)
	if _, err := w.Append(context.Background(), testRecord(0), big); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Append = %v, want ErrRecordTooLarge", err)
	}
	if _, err := w.Append(context.Background()); !errors.Is(err, ErrNoRecords) {
		t.Fatalf("empty Append = %v, want ErrNoRecords", err)
	}
	if w.NextSeq() != 0 {
		t.Fatalf("NextSeq = %d, want 0: nothing may be appended", w.NextSeq())
	}
}

func TestSegmentsRollAtSegmentBytes(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentBytes: 1 << 10})
	for i := range 100 {
		appendN(t, w, i, 1)
	}
	if n := w.Stats().Segments; n < 5 {
		t.Fatalf("%d segments after ~7 KiB with 1 KiB segments", n)
	}
	w.Close()
	w2 := openT(t, dir, Options{SegmentBytes: 1 << 10})
	es, err := w2.ReadFrom(0, 1000)
	if err != nil || len(es) != 100 {
		t.Fatalf("ReadFrom after reopen: %d, %v", len(es), err)
	}
	checkEntries(t, es, 0, func(seq uint64) int { return int(seq) })
}

func TestAppendCFiresAfterDurableBatch(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	c := w.AppendC()
	select {
	case <-c:
		t.Fatal("AppendC closed before any append")
	default:
	}
	appendN(t, w, 0, 1)
	select {
	case <-c:
	default:
		t.Fatal("AppendC not closed after a durable append")
	}
	if w.AppendC() == c {
		t.Fatal("AppendC not replaced")
	}
}

func TestCloseRefusesLaterAppendsAndSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	w.Close()
	if _, err := w.Append(context.Background(), testRecord(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
}

// After a batch of several callers, the next sync waits (up to gatherFor) for as many callers
// to stage, so they share one write and fsync; a lone producer never waits.
func TestASyncGathersAsManyCallersAsTheLastBatchHad(t *testing.T) {
	old := gatherFor
	gatherFor = time.Minute // the wait below ends by the callers, never by the bound
	t.Cleanup(func() { gatherFor = old })
	w := openT(t, t.TempDir(), Options{})

	// One caller at a time: no wait, whatever the bound.
	for i := range 3 {
		done := make(chan error, 1)
		go func() { _, err := w.Append(context.Background(), testRecord(i)); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a lone caller waited for others")
		}
	}

	// A batch of two callers: hold the write until both are staged.
	release, ended := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(ended) }) // before the WAL's close: a failed test leaves no write held
	var writes atomic.Int32
	w.beforeWrite = func() {
		writes.Add(1)
		select {
		case <-release:
		case <-ended:
		}
	}
	errs := make(chan error, 4)
	appendAsync := func(i int) {
		go func() { _, err := w.Append(context.Background(), testRecord(i)); errs <- err }()
	}
	appendAsync(10) // taken by the sync loop alone, then held in beforeWrite
	testwait.For(t, 10*time.Second, "the first batch is being written", func() bool { return writes.Load() == 1 })
	appendAsync(11)
	appendAsync(12)
	testwait.For(t, 10*time.Second, "two callers staged", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.stage.callers == 2
	})
	release <- struct{}{} // the first batch (one caller) goes
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the two-caller batch is being written", func() bool { return writes.Load() == 2 })
	release <- struct{}{}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// The last batch had two callers: a third alone waits for a fourth, and both go together.
	appendAsync(13)
	select {
	case err := <-errs:
		t.Fatalf("the caller after a two-caller batch did not wait for another: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if n := writes.Load(); n != 2 {
		t.Fatalf("%d batches written, want 2 (the third is gathering)", n)
	}
	appendAsync(14)
	testwait.For(t, 10*time.Second, "the gathered batch is being written", func() bool { return writes.Load() == 3 })
	w.mu.Lock()
	staged := w.stage.callers
	w.mu.Unlock()
	release <- struct{}{}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if staged != 0 || writes.Load() != 3 {
		t.Fatalf("after the gathered batch: %d callers staged, %d batches written; want 0 and 3", staged, writes.Load())
	}
}
