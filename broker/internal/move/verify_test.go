package move

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

// hideTail reopens the source log with its hwm file lowered to hwm: the records above it
// become a hidden tail (a crash between a commit's fsync and its hwm persist).
func (s *fakeSource) hideTail(hwm int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.log.Close(); err != nil {
		s.t.Fatal(err)
	}
	if err := plog.WriteHWMFile(s.dir, hwm, false); err != nil {
		s.t.Fatal(err)
	}
	l, err := plog.Open(s.dir, plog.Options{SegmentBytes: 1 << 20})
	if err != nil {
		s.t.Fatal(err)
	}
	if l.HighWatermark() != hwm || l.NextOffset() <= hwm {
		s.t.Fatalf("setup: hwm %d next %d", l.HighWatermark(), l.NextOffset())
	}
	s.log = l
}

const cutLog = "move: staged copy recovered past the high watermark; cut back"

// MV-14: an older source lists whole files, past its HWM; the staged copy is cut back to the
// HWM before the verify, which then requires it to end exactly there.
func TestCopyListedPastTheHWMIsCutBackBeforeVerify(t *testing.T) {
	h := newHarness(t, 1<<20)
	h.src.MustProduce(10, 100)
	h.src.MustProduce(5, 100)
	h.src.hideTail(10)
	h.src.fileSizes.Store(true)
	h.start()
	h.waitFlipped(10 * time.Second)
	if m := h.checkInstalled(); m.HWM != 10 {
		t.Fatalf("installed hwm %d, want 10", m.HWM)
	}
	if h.logs.count(cutLog) == 0 {
		t.Fatal("the verify did not cut the copy back")
	}
}

// MV-14: a staged segment longer than a later listing reports is cut back to it: the
// destination never keeps more than a listing reported.
func TestStagedSegmentLongerThanTheListingIsCutBack(t *testing.T) {
	h := newHarness(t, 1<<20)
	h.src.MustProduce(10, 100)
	h.src.MustProduce(5, 100)
	h.src.hideTail(10)
	h.src.fileSizes.Store(true)
	h.src.onList = func(s *fakeSource, n int64) {
		if n == 2 {
			s.fileSizes.Store(false) // pass 1 and later list the committed boundary
		}
	}
	h.start()
	h.waitFlipped(10 * time.Second)
	if m := h.checkInstalled(); m.HWM != 10 {
		t.Fatalf("installed hwm %d", m.HWM)
	}
	if n := h.logs.count(cutLog); n != 0 {
		t.Fatal("the staged copy kept bytes the listing no longer reported until the verify")
	}
}

// MV-15: a copy that fails verification is copied once more from scratch; a second failure
// blocks the move with the exact error line and the copy_unverifiable gauge, and the source
// is never frozen again; its last freeze lapses on its TTL.
func TestUnverifiableCopyIsRetriedOnceThenBlocks(t *testing.T) {
	h := newHarness(t, 4096)
	h.cfg.FreezeTTL = 200 * time.Millisecond
	h.src.MustProduce(60, 100)
	faults.Set(FaultVerify, nil)
	var prepares atomic.Int64
	h.src.onPrepare = func(transfer.PrepareRequest) { prepares.Add(1) }
	h.start()
	h.waitPhase(transfer.PhaseBlocked, 10*time.Second)
	const line = "move: staged copy cannot be verified; not freezing the source again"
	if recs := h.logs.find(line); len(recs) != 1 || recs[0].level.String() != "ERROR" {
		t.Fatalf("want the exact error line once, got %v", recs)
	}
	if n := h.logs.count("move: staged copy cannot be verified; copying once more from scratch"); n != 1 {
		t.Fatalf("want one from-scratch retry, got %d", n)
	}
	if got := h.blocked(transfer.BlockedCopyUnverifiable); got != 1 {
		t.Fatalf("narad_moves_blocked{copy_unverifiable} = %v", got)
	}
	if h.src.arms.Load() != 2 {
		t.Fatalf("arms=%d, want 2 (one per copy)", h.src.arms.Load())
	}
	if rep, _ := h.report(); rep.BlockedReason != transfer.BlockedCopyUnverifiable || rep.LastError == "" {
		t.Fatalf("report %+v", rep)
	}
	calls := prepares.Load()
	ticks := func() int64 { return h.r.pace.Passes() + h.r.pace.Skips() }
	base := ticks()
	testwait.For(t, 5*time.Second, "runner ticks", func() bool { return ticks() >= base+40 })
	testwait.For(t, 5*time.Second, "the last freeze to lapse", func() bool { return !h.src.Frozen() })
	if prepares.Load() != calls {
		t.Fatalf("a blocked worker called PrepareHandoff %d more times", prepares.Load()-calls)
	}
	if err := h.src.Produce(1, 100); err != nil {
		t.Fatalf("the source must serve once the freeze lapsed: %v", err)
	}
	if h.r.Workers() != 1 {
		t.Fatal("a blocked move must keep its slot")
	}
	h.stop()
	if got := h.blocked(transfer.BlockedCopyUnverifiable); got != 0 {
		t.Fatalf("gauge %v after the worker ended", got)
	}
	if exists(h.staging()) || exists(h.path()) {
		t.Fatal("a blocked move that ended left its copy behind")
	}
}

// docs/cluster.md, "A node that dies mid-move": a destination restart gives a move blocked as copy_unverifiable
// exactly one more try: one more freeze and verify, then blocked again, without another copy
// from scratch. Once that try verifies, the move completes and leaves no note behind.
func TestRestartGivesABlockedUnverifiableCopyExactlyOneMoreTry(t *testing.T) {
	h := newHarness(t, 4096)
	h.cfg.FreezeTTL = 200 * time.Millisecond
	h.src.MustProduce(60, 100)
	faults.Set(FaultVerify, nil)
	h.start()
	h.waitPhase(transfer.PhaseBlocked, 10*time.Second)
	if arms := h.src.arms.Load(); arms != 2 {
		t.Fatalf("arms before the restart = %d, want 2 (a copy and one from scratch)", arms)
	}
	const scratch = "move: staged copy cannot be verified; copying once more from scratch"
	const blocked = "move: staged copy cannot be verified; not freezing the source again"

	h.stop() // the destination restarts
	h.start()
	h.waitPhase(transfer.PhaseBlocked, 10*time.Second)
	ticks := func() int64 { return h.r.pace.Passes() + h.r.pace.Skips() }
	base := ticks()
	testwait.For(t, 5*time.Second, "runner ticks", func() bool { return ticks() >= base+40 })
	if arms := h.src.arms.Load(); arms != 3 {
		t.Fatalf("arms after the restart = %d, want 3 (exactly one more try)", arms)
	}
	if n := h.logs.count(scratch); n != 1 {
		t.Fatalf("copies from scratch = %d, want still 1 after the restart", n)
	}
	if n := h.logs.count(blocked); n != 2 {
		t.Fatalf("blocked lines = %d, want 2 (before and after the restart)", n)
	}
	if got := h.blocked(transfer.BlockedCopyUnverifiable); got != 1 {
		t.Fatalf("narad_moves_blocked{copy_unverifiable} = %v", got)
	}

	faults.Reset() // whatever made the copy unverifiable is fixed; restart once more
	h.stop()
	h.start()
	h.waitFlipped(10 * time.Second)
	testwait.For(t, 5*time.Second, "the worker to exit", func() bool { return h.r.Workers() == 0 })
	if exists(datadir.UnverifiableNotePath(h.staging())) {
		t.Fatal("a completed move left its blocked-copy note")
	}
}

// A note of a move that is no longer aimed at this node when it restarts is removed by the
// first caught-up pass, so a later move of the partition gets its full two tries.
func TestStaleUnverifiableNoteIsPrunedAtStart(t *testing.T) {
	h := newHarness(t, 4096)
	h.st.putAssignment(meta.Assignment{Topic: topicName, Partition: 0, Owner: srcNode}) // no move
	note := datadir.UnverifiableNotePath(h.staging())
	if err := os.MkdirAll(filepath.Dir(note), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(note, []byte(`{"source":"n0","incarnation":"inc-1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	testwait.For(t, 5*time.Second, "a full pass", func() bool { return h.r.pace.Passes() > 0 })
	testwait.For(t, 5*time.Second, "the stale note removed", func() bool { return !exists(note) })
}

// MV-17: each staged segment gets its source age on the destination's clock, whatever the
// skew; an mtime more than an hour in the future of the listing is ignored.
func TestSegmentAgesCarryAcrossSkewedClocks(t *testing.T) {
	h := newHarness(t, 2048)
	for range 6 {
		h.src.MustProduce(10, 100) // one frame each: several segments
	}
	segs, _ := h.src.segmentFiles()
	if len(segs) < 3 {
		t.Fatalf("setup: %d segments", len(segs))
	}
	now := time.Now()
	old := now.Add(-5 * 24 * time.Hour)
	h.src.mtimes[segs[0].Base] = old.UnixMilli()
	h.src.mtimes[segs[1].Base] = now.Add(2 * time.Hour).UnixMilli() // future: ignored
	skew := time.Hour
	h.src.recvClock = func() time.Time { return time.Now().Add(skew) } // the destination's clock runs 1 h ahead
	h.cfg.Now = h.src.recvClock
	h.start()
	h.waitFlipped(10 * time.Second)
	mtime := func(base int64) time.Time {
		fi, err := os.Stat(filepath.Join(h.path(), plog.SegmentFileName(base)))
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime()
	}
	want := old.Add(skew) // the same age on the destination's clock
	if got := mtime(segs[0].Base); got.Sub(want).Abs() > 10*time.Second {
		t.Fatalf("segment age: installed mtime %v, want ≈ %v (5 days old on the destination clock)", got, want)
	}
	if got := mtime(segs[1].Base); time.Until(got).Abs() > time.Minute {
		t.Fatalf("a future mtime must be ignored (write time kept): got %v", got)
	}
}

// MV-18: positions are clamped to the copy: frontier ≤ HWM−1 (warned), acked-ahead below
// the HWM, cursors lowered to the HWM without a log line.
func TestInstalledPositionsAreClampedToTheHWM(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed int64
		acked     []int64
		cursor    int64
		frontier  int64
		wantAcked []int64
		wantNext  int64
		warned    bool
	}{
		{"frontier past the hwm", 45, []int64{47, 48}, 12, 39, nil, 12, true},
		{"acked past the hwm", 10, []int64{12, 15, 40, 43}, 41, 10, []int64{12, 15}, 40, false},
		{"nothing to clamp", 20, []int64{25}, 40, 20, []int64{25}, 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 4096)
			h.src.MustProduce(40, 100)
			h.src.setPositions(tc.committed, tc.acked, []transfer.Cursor{{Child: childName, Record: cursorRecord(t, "epoch-7", tc.cursor)}})
			h.start()
			h.waitFlipped(10 * time.Second)
			c := readCheckpoint(t, h.path())
			if c.Frontier != tc.frontier || !slices.Equal(c.AckedAhead, tc.wantAcked) {
				t.Fatalf("checkpoint %+v, want frontier %d acked %v", c, tc.frontier, tc.wantAcked)
			}
			b, err := os.ReadFile(cursorfile.Path(h.path(), childName))
			if err != nil {
				t.Fatal(err)
			}
			if st, err := cursorfile.Parse(b); err != nil || st.NextOffset != tc.wantNext || st.Epoch != "epoch-7" {
				t.Fatalf("cursor %+v %v, want next %d", st, err, tc.wantNext)
			}
			warned := h.logs.count("move: listed consumer frontier is past the high watermark; clamped") > 0
			if warned != tc.warned {
				t.Fatalf("clamp warning logged=%v, want %v", warned, tc.warned)
			}
			if strings.Contains(h.logs.dump(), "cursor") {
				t.Fatalf("a lowered cursor must not be logged:\n%s", h.logs.dump())
			}
		})
	}
}

// A cursor sidecar that fails its CRC, or names an unusable child, is never installed.
func TestUnverifiedCursorSidecarIsNeverInstalled(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(10, 100)
	bad := cursorRecord(t, "epoch-7", 5)
	bad[40] ^= 1
	h.src.setPositions(3, nil, []transfer.Cursor{
		{Child: childName, Record: bad},
		{Child: "../escape", Record: cursorRecord(t, "epoch-7", 5)},
	})
	h.start()
	h.waitFlipped(10 * time.Second)
	if exists(cursorfile.Path(h.path(), childName)) {
		t.Fatal("a cursor that fails its CRC was installed")
	}
	if exists(filepath.Join(h.path(), "..", "fanout-escape.offset")) || exists(cursorfile.Path(h.path(), "../escape")) {
		t.Fatal("a cursor with a path in its child name was written")
	}
}
