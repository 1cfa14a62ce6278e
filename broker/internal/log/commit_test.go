package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"narad.dev/broker/internal/faults"
)

func TestCommitAssignsDenseOffsetsAndMakesThemVisible(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	defer closeT(t, l)
	a, b := testEntries("a", 3, 20), testEntries("b", 4, 20)
	if f := commitT(t, l, a, 100); f != 0 {
		t.Fatalf("first = %d, want 0", f)
	}
	if f := commitT(t, l, b, 200); f != 3 {
		t.Fatalf("first = %d, want 3", f)
	}
	if l.HighWatermark() != 7 || l.NextOffset() != 7 {
		t.Fatalf("hwm %d next %d, want 7 7", l.HighWatermark(), l.NextOffset())
	}
	for i, e := range a {
		expectRecord(t, l, int64(i), e, 100)
	}
	for i, e := range b {
		expectRecord(t, l, int64(3+i), e, 200)
	}
	if _, err := l.Read(7); !errors.Is(err, ErrNotVisible) {
		t.Fatalf("Read(hwm) err = %v, want ErrNotVisible", err)
	}
	if st := readHWMT(t, dir); st.hwm != 7 || st.clean {
		t.Fatalf("hwm file %+v, want 7 not clean", st)
	}
}

func TestCommitDoesOneSegmentFsyncAndOneHWMPersist(t *testing.T) {
	obs := &countingObserver{}
	l := openT(t, t.TempDir(), Options{Observer: obs})
	defer closeT(t, l)
	for i := 0; i < 5; i++ {
		commitT(t, l, testEntries("x", 100, 64), int64(i))
	}
	if obs.fsyncs.Load() != 5 || obs.hwmPersists.Load() != 5 || obs.flushes.Load() != 5 {
		t.Fatalf("fsyncs %d hwm persists %d flushes %d for 5 commits, want 5 each",
			obs.fsyncs.Load(), obs.hwmPersists.Load(), obs.flushes.Load())
	}
}

// ST-5: a commit whose fsync or verify fails is truncated away and its offsets are reused.
func TestFailedCommitTruncatesAndNextCommitReusesOffsets(t *testing.T) {
	for _, point := range []string{FaultBeforeFsync, FaultAfterFsync, FaultVerify} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, Options{})
			defer closeT(t, l)
			commitT(t, l, testEntries("a", 3, 32), 1)
			seg := segPaths(t, dir)[0]
			size := fileSize(t, seg)

			faults.Set(point, nil)
			_, err := l.Commit(testEntries("b", 5, 32), 2)
			faults.Clear(point)
			if !errors.Is(err, faults.ErrInjected) || errors.Is(err, ErrFailed) {
				t.Fatalf("commit err = %v, want injected, not failed", err)
			}
			if got := fileSize(t, seg); got != size {
				t.Fatalf("segment size %d after failed commit, want %d", got, size)
			}
			if l.NextOffset() != 3 || l.HighWatermark() != 3 {
				t.Fatalf("next %d hwm %d, want 3 3", l.NextOffset(), l.HighWatermark())
			}
			c := testEntries("c", 2, 32)
			if first := commitT(t, l, c, 3); first != 3 {
				t.Fatalf("next commit first = %d, want reused 3", first)
			}
			expectRecord(t, l, 4, c[1], 3)
		})
	}
}

func TestHWMPersistFailureEntersFailedStateUntilReopen(t *testing.T) {
	for _, point := range []string{FaultBeforeHWMPersist, FaultHWMPersist} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			obs := &countingObserver{}
			l := openT(t, dir, Options{Observer: obs})
			commitT(t, l, testEntries("a", 2, 16), 1)
			faults.Set(point, nil)
			_, err := l.Commit(testEntries("b", 2, 16), 2)
			faults.Clear(point)
			if !errors.Is(err, ErrFailed) || !errors.Is(err, faults.ErrInjected) {
				t.Fatalf("err = %v, want ErrFailed wrapping the injected error", err)
			}
			if obs.hwmErrors.Load() != 1 {
				t.Fatalf("observer saw %d hwm errors, want 1", obs.hwmErrors.Load())
			}
			if l.HighWatermark() != 2 || !l.Failed() {
				t.Fatalf("hwm %d failed %v, want 2 true", l.HighWatermark(), l.Failed())
			}
			if _, err := l.Commit(testEntries("c", 1, 16), 3); !errors.Is(err, ErrFailed) {
				t.Fatalf("later commit err = %v, want ErrFailed", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if st := readHWMT(t, dir); st.clean {
				t.Fatal("a failed log must not close CLEAN")
			}
			l = openT(t, dir, Options{})
			defer closeT(t, l)
			// b's frames survive as a hidden tail; the next commit appends after them.
			if l.HighWatermark() != 2 || l.NextOffset() != 4 {
				t.Fatalf("reopened hwm %d next %d, want 2 4", l.HighWatermark(), l.NextOffset())
			}
			if first := commitT(t, l, testEntries("c", 1, 16), 3); first != 4 {
				t.Fatalf("first after reopen = %d, want 4", first)
			}
		})
	}
}

func TestTruncateFailureEntersFailedState(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer l.Close()
	commitT(t, l, testEntries("a", 1, 16), 1)
	armFault(t, FaultVerify, nil)
	armFault(t, FaultTruncate, nil)
	if _, err := l.Commit(testEntries("b", 1, 16), 2); !errors.Is(err, ErrFailed) {
		t.Fatalf("err = %v, want ErrFailed", err)
	}
	faults.Clear(FaultVerify)
	if _, err := l.Commit(testEntries("c", 1, 16), 3); !errors.Is(err, ErrFailed) {
		t.Fatalf("err = %v, want ErrFailed", err)
	}
}

func TestCommitRejectsEmptyBatchAndOversizeRecordWritingNothing(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer closeT(t, l)
	if _, err := l.Commit(nil, 1); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty: err = %v", err)
	}
	l.splitAt = 64
	if _, err := l.Commit([]Entry{{Payload: make([]byte, 100)}}, 1); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversize: err = %v", err)
	}
	if l.NextOffset() != 0 || l.Stats().SizeBytes != 0 {
		t.Fatalf("rejected commit wrote: next %d size %d", l.NextOffset(), l.Stats().SizeBytes)
	}
}

func TestCommitRollsSegmentOnceItReachesSegmentBytes(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{SegmentBytes: 4096})
	var all []Entry
	for i := 0; i < 20; i++ {
		es := testEntries(fmt.Sprint(i), 10, 50)
		commitT(t, l, es, int64(i))
		all = append(all, es...)
	}
	closeT(t, l)
	paths := segPaths(t, dir)
	if len(paths) < 3 {
		t.Fatalf("%d segments, want several", len(paths))
	}
	for i, p := range paths[:len(paths)-1] {
		if sz := fileSize(t, p); sz < 4096 {
			t.Fatalf("sealed segment %d is %d bytes, below the roll size", i, sz)
		}
	}
	l = openT(t, dir, Options{SegmentBytes: 4096})
	defer closeT(t, l)
	for i, e := range all {
		expectRecord(t, l, int64(i), e, int64(i/10))
	}
	for _, p := range paths {
		base, _ := ParseSegmentFileName(filepath.Base(p))
		if base%10 != 0 {
			t.Fatalf("segment %s does not start at a commit boundary", p)
		}
	}
}

func TestConcurrentCommitsAndReadersSeeOnlyCommittedRecords(t *testing.T) {
	l := openT(t, t.TempDir(), Options{SegmentBytes: 16 << 10, Codec: CodecZstd})
	defer closeT(t, l)
	const writers, commits, per = 4, 25, 5
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		pos := int64(0)
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				close(readErr)
				return
			default:
			}
			h := l.HighWatermark()
			off := pos
			if pos >= h { // caught up: re-read an older record (cache, nav and index paths)
				off = (i * 7919) % max(h, 1)
			} else {
				pos++
			}
			if h == 0 {
				continue
			}
			r, err := l.Read(off)
			if err != nil || r.Offset != off {
				readErr <- fmt.Errorf("Read(%d) below hwm %d: %+v %v", off, h, r, err)
				return
			}
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for c := 0; c < commits; c++ {
				if _, err := l.Commit(testEntries(fmt.Sprint(w, c), per, 100), int64(c)); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	if want := int64(writers * commits * per); l.HighWatermark() != want || l.NextOffset() != want {
		t.Fatalf("hwm %d next %d, want %d", l.HighWatermark(), l.NextOffset(), want)
	}
}

func TestClosedLogRefusesCalls(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	commitT(t, l, testEntries("a", 1, 8), 1)
	closeT(t, l)
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close err = %v", err)
	}
	if _, err := l.Commit(testEntries("b", 1, 8), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit err = %v", err)
	}
	if _, err := l.Read(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read err = %v", err)
	}
	if _, err := l.ApplyRetention(1, l.opts.Now()); !errors.Is(err, ErrClosed) {
		t.Fatalf("ApplyRetention err = %v", err)
	}
	if l.Stats().Exact {
		t.Fatal("a closed log's Stats must not be exact")
	}
	if _, err := os.Stat(filepath.Join(dir, HWMFileName)); err != nil {
		t.Fatal(err)
	}
}
