package move

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
)

// failOneSegmentSync makes the first fsync of a staged segment of the given kind (dataOnly:
// the background fsync of a sealed segment; otherwise the seal's) fail as a disk whose
// write-back failed: the file keeps its size but its bytes are gone (zeros), and the call
// returns EIO. Every later fsync succeeds, as the kernel reports such an error only once. It
// returns the base of the segment it failed (-1 until then).
func failOneSegmentSync(t *testing.T, dataOnly bool) func() int64 {
	t.Helper()
	real := syncStaged
	t.Cleanup(func() { syncStaged = real })
	var (
		mu     sync.Mutex
		failed = int64(-1)
	)
	syncStaged = func(path string, data bool) error {
		base, isSeg := plog.ParseSegmentFileName(filepath.Base(path))
		mu.Lock()
		fail := isSeg && data == dataOnly && failed < 0
		if fail {
			failed = base
		}
		mu.Unlock()
		if !fail {
			return real(path, data)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("stat %s: %v", path, err)
			return err
		}
		if err := os.WriteFile(path, make([]byte, fi.Size()), 0o644); err != nil {
			t.Errorf("zero %s: %v", path, err)
		}
		return &os.PathError{Op: "fsync", Path: path, Err: syscall.EIO}
	}
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
}

// docs/internals/moves.md §5.7 rule 5: a segment whose fsync failed, in the background (a
// sealed segment whose last chunk landed) or in the seal, is deleted and copied again before
// the copy is sealed. Without that, a retried fsync succeeds over the lost bytes and the move
// installs them.
func TestFailedFsyncCopiesTheSegmentAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dataOnly bool
		warning  string
	}{
		{"background", true, "move: the fsync of a staged segment failed; copying it again"},
		{"seal", false, "move: the fsync of a staged file failed in the seal; copying it again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 4096)
			h.src.MustProduce(60, 100)
			failed := failOneSegmentSync(t, tc.dataOnly)
			h.start()
			h.waitFlipped(10 * time.Second)
			if failed() < 0 {
				t.Fatal("no fsync of that kind ran on a staged segment")
			}
			h.checkInstalled()
			if recs := h.logs.find(tc.warning); len(recs) != 1 || recs[0].level.String() != "WARN" {
				t.Fatalf("want one warning %q, got %v", tc.warning, recs)
			}
		})
	}
}

// settle reports a failed background fsync once, having deleted its segment.
func TestSyncLostIsAnAttemptError(t *testing.T) {
	s := newSession(t.TempDir())
	if err := s.ensureDir(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.segPath(0), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	real := syncStaged
	t.Cleanup(func() { syncStaged = real })
	syncStaged = func(string, bool) error { return syscall.EIO }
	s.syncLater(0)
	err := s.settle(slog.New(newLogRecorder()))
	if !errors.Is(err, errSyncLost) {
		t.Fatalf("settle = %v, want errSyncLost", err)
	}
	if exists(s.segPath(0)) {
		t.Fatal("the segment whose fsync failed was kept")
	}
	if err := s.settle(slog.New(newLogRecorder())); err != nil {
		t.Fatalf("a second settle = %v; the loss was reported already", err)
	}
}

// failingBehind is a write-behind whose first wait fails as a disk's write-back does: the bytes
// written so far are gone (zeros on the file) and the call returns EIO.
type failingBehind struct {
	f      *os.File
	failed *atomic.Int64 // the base of the segment it failed, -1 until then
}

func (b failingBehind) Wrote(end int64) error {
	base, _ := plog.ParseSegmentFileName(filepath.Base(b.f.Name()))
	if !b.failed.CompareAndSwap(-1, base) {
		return nil
	}
	if _, err := b.f.WriteAt(make([]byte, end), 0); err != nil {
		return err
	}
	return syscall.EIO
}

// docs/internals/moves.md §5.7 rule 5: a sealed segment whose write-back failed while it was
// copied is deleted and copied again from its start. Resuming from its staged size would keep
// the bytes the failed write-back lost, and the move would install them.
func TestFailedWriteBackCopiesTheSegmentAgain(t *testing.T) {
	var failed atomic.Int64
	failed.Store(-1)
	real := newBehind
	t.Cleanup(func() { newBehind = real })
	newBehind = func(f *os.File) behindWriter { return failingBehind{f: f, failed: &failed} }

	h := newHarness(t, 4096)
	h.src.MustProduce(60, 100)
	h.start()
	h.waitFlipped(10 * time.Second)
	if failed.Load() < 0 {
		t.Fatal("no sealed segment was written with write-behind")
	}
	h.checkInstalled()
	const warning = "move: the write-back of a staged segment failed; copying it again"
	if recs := h.logs.find(warning); len(recs) != 1 || recs[0].level.String() != "WARN" {
		t.Fatalf("want one warning %q, got %v", warning, recs)
	}
}
