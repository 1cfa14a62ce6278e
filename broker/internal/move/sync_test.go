package move

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
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

// docs/internals/moves.md §5.7 rule 5: a sealed segment whose background fsync failed is
// copied again. Without that, the retried fsync succeeds over the lost bytes and the move
// installs them.
func TestFailedBackgroundFsyncCopiesTheSegmentAgain(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(60, 100)
	failed := failOneSegmentSync(t, true)
	h.start()
	h.waitFlipped(10 * time.Second)
	if failed() < 0 {
		t.Fatal("no background fsync of a sealed segment ran")
	}
	h.checkInstalled()
	recs := h.logs.find("move: the fsync of a staged segment failed; copying it again")
	if len(recs) != 1 || recs[0].level.String() != "WARN" {
		t.Fatalf("want one warning for the lost segment, got %v", recs)
	}
}

// docs/internals/moves.md §5.7 rule 5: a segment whose fsync fails in the seal is deleted and
// the next attempt copies it again before sealing.
func TestFailedSealFsyncCopiesTheSegmentAgain(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(60, 100)
	failed := failOneSegmentSync(t, false)
	h.start()
	h.waitFlipped(10 * time.Second)
	if failed() < 0 {
		t.Fatal("the seal fsynced no segment")
	}
	h.checkInstalled()
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
