package log

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leaderWithSealed returns a log of committed records whose segments roll every few KiB, and
// its committed listing (at least three sealed segments).
func leaderWithSealed(t *testing.T) (*Log, []SegmentInfo) {
	t.Helper()
	l := openReplicaLog(t, t.TempDir(), 4<<10)
	for i := range 40 {
		commitT(t, l, testEntries(string(rune('a'+i%26)), 5, 200), int64(1000+i))
	}
	_, segs, err := l.CommittedListing()
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 || !segs[2].Sealed {
		t.Fatalf("want several sealed segments, got %+v", segs)
	}
	return l, segs
}

// segmentBytes reads a listed segment of l whole.
func segmentBytes(t *testing.T, l *Log, s SegmentInfo) []byte {
	t.Helper()
	b := make([]byte, s.Size)
	if n, err := l.ReadCommitted(s.Base, 0, b); err != nil || int64(n) != s.Size {
		t.Fatalf("ReadCommitted(%d) = %d, %v", s.Base, n, err)
	}
	return b
}

// copyIn writes b into a new copy of f in pieces of random sizes and returns the copy.
func copyIn(t *testing.T, f *Log, b []byte, rng *rand.Rand) *SegmentCopy {
	t.Helper()
	c, err := f.BeginSegmentCopy()
	if err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(700))
		if err := c.Write(b[:n]); err != nil {
			t.Fatalf("Write: %v", err)
		}
		b = b[n:]
	}
	return c
}

func TestSegmentCopyInstallsSealedSegments(t *testing.T) {
	leader, segs := leaderWithSealed(t)
	dir := t.TempDir()
	f := openReplicaLog(t, dir, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	var end int64
	for _, s := range segs {
		if !s.Sealed {
			break
		}
		c := copyIn(t, f, segmentBytes(t, leader, s), rng)
		if c.Base() != s.Base {
			t.Fatalf("copy starts at %d, segment at %d", c.Base(), s.Base)
		}
		var err error
		if end, err = c.Install(); err != nil {
			t.Fatalf("Install(%d): %v", s.Base, err)
		}
		if f.NextOffset() != end || f.HighWatermark() != 0 {
			t.Fatalf("after install: next %d (want %d), hwm %d", f.NextOffset(), end, f.HighWatermark())
		}
	}
	next := segs[len(segs)-1].Base // the first segment not copied starts where the copies end
	if end != next {
		t.Fatalf("copies end at %d, leader's next segment starts at %d", end, next)
	}
	if err := f.AdvanceHWM(end); err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < end; off++ {
		want, err := leader.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Read(off)
		if err != nil || string(got.Payload) != string(want.Payload) || got.CommittedAt != want.CommittedAt {
			t.Fatalf("Read(%d) = %+v, %v; leader has %+v", off, got, err, want)
		}
	}
	// The rest follows by frames, as a follower fetches it.
	commitT(t, leader, testEntries("z", 3, 50), 2000)
	frames, fnext, err := leader.ReadFrames(end, 1<<20)
	if err != nil || fnext <= end {
		t.Fatalf("ReadFrames(%d) = %d bytes to %d, %v", end, len(frames), fnext, err)
	}
	if leo, err := f.AppendFrames(frames); err != nil || leo != fnext {
		t.Fatalf("AppendFrames after the installs = %d, %v; want %d", leo, err, fnext)
	}
	f.Close()
	again := openReplicaLog(t, dir, 1<<20)
	if again.NextOffset() != fnext || again.HighWatermark() != end {
		t.Fatalf("reopened: next %d hwm %d, want %d and %d", again.NextOffset(), again.HighWatermark(), fnext, end)
	}
	if r, err := again.Read(end - 1); err != nil || r.Offset != end-1 {
		t.Fatalf("reopened Read(%d) = %+v, %v", end-1, r, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*"+"tmp-*")); len(tmps) != 0 {
		t.Fatalf("temp files left: %v", tmps)
	}
}

func TestSegmentCopyRefusals(t *testing.T) {
	leader, segs := leaderWithSealed(t)
	first, second := segmentBytes(t, leader, segs[0]), segmentBytes(t, leader, segs[1])
	rng := rand.New(rand.NewPCG(3, 4))

	t.Run("a log with records at its end", func(t *testing.T) {
		f := openReplicaLog(t, t.TempDir(), 1<<20)
		frames, _, err := leader.ReadFrames(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.AppendFrames(frames); err != nil {
			t.Fatal(err)
		}
		if _, err := f.BeginSegmentCopy(); !errors.Is(err, ErrNotEmptyActive) {
			t.Fatalf("BeginSegmentCopy = %v, want ErrNotEmptyActive", err)
		}
	})
	t.Run("a damaged byte", func(t *testing.T) {
		dir := t.TempDir()
		f := openReplicaLog(t, dir, 1<<20)
		bad := append([]byte(nil), first...)
		bad[len(bad)/2] ^= 0x40
		c, err := f.BeginSegmentCopy()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Write(bad); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("Write of a damaged segment = %v, want ErrCorruptRecord", err)
		}
		c.Abort()
		assertUntouched(t, f, dir)
	})
	t.Run("a segment that does not start at the end offset", func(t *testing.T) {
		dir := t.TempDir()
		f := openReplicaLog(t, dir, 1<<20)
		c, err := f.BeginSegmentCopy()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Write(second); !errors.Is(err, ErrNotContiguous) {
			t.Fatalf("Write of the second segment first = %v, want ErrNotContiguous", err)
		}
		c.Abort()
		assertUntouched(t, f, dir)
	})
	t.Run("a copy that ends inside a frame", func(t *testing.T) {
		dir := t.TempDir()
		f := openReplicaLog(t, dir, 1<<20)
		c := copyIn(t, f, first[:len(first)-5], rng)
		if _, err := c.Install(); !errors.Is(err, ErrCopyIncomplete) {
			t.Fatalf("Install of a partial copy = %v, want ErrCopyIncomplete", err)
		}
		c.Abort()
		assertUntouched(t, f, dir)
	})
	t.Run("an empty copy", func(t *testing.T) {
		f := openReplicaLog(t, t.TempDir(), 1<<20)
		c, err := f.BeginSegmentCopy()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Abort()
		if _, err := c.Install(); !errors.Is(err, ErrCopyIncomplete) {
			t.Fatalf("Install of an empty copy = %v, want ErrCopyIncomplete", err)
		}
	})
	t.Run("a log appended to during the copy", func(t *testing.T) {
		dir := t.TempDir()
		f := openReplicaLog(t, dir, 1<<20)
		c := copyIn(t, f, first, rng)
		frames, next, err := leader.ReadFrames(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.AppendFrames(frames); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Install(); !errors.Is(err, ErrNotEmptyActive) {
			t.Fatalf("Install over an appended log = %v, want ErrNotEmptyActive", err)
		}
		c.Abort()
		if f.NextOffset() != next || f.Failed() {
			t.Fatalf("log after the refused install: next %d (want %d), failed %v", f.NextOffset(), next, f.Failed())
		}
	})
}

// assertUntouched checks that f is still empty at 0 and that no temp file is left in dir.
func assertUntouched(t *testing.T, f *Log, dir string) {
	t.Helper()
	if f.NextOffset() != 0 || f.Failed() {
		t.Fatalf("log changed: next %d, failed %v", f.NextOffset(), f.Failed())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "tmp-") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
}

// A crash inside Install, after the copy took the active segment's name but before the next
// active segment exists, recovers with the copy as the active segment: every frame of it kept.
func TestSegmentCopyInstallCrashRecovers(t *testing.T) {
	leader, segs := leaderWithSealed(t)
	dir := t.TempDir()
	f := openReplicaLog(t, dir, 1<<20)
	c := copyIn(t, f, segmentBytes(t, leader, segs[0]), rand.New(rand.NewPCG(5, 6)))
	armFault(t, FaultInstallSegment, errors.New("injected"))
	if _, err := c.Install(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Install with the fault armed = %v, want ErrFailed", err)
	}
	if !f.Failed() {
		t.Fatal("log not in failed state after a failed install")
	}
	f.Close()
	again := openReplicaLog(t, dir, 1<<20)
	if again.NextOffset() != segs[1].Base {
		t.Fatalf("recovered next %d, want %d", again.NextOffset(), segs[1].Base)
	}
	if err := again.AdvanceHWM(segs[1].Base); err != nil {
		t.Fatal(err)
	}
	if r, err := again.Read(segs[1].Base - 1); err != nil || r.Offset != segs[1].Base-1 {
		t.Fatalf("Read of the copy's last record = %+v, %v", r, err)
	}
}

// A copy abandoned by a crash (its temp file left) is removed by the next Open.
func TestSegmentCopyTempRemovedOnOpen(t *testing.T) {
	leader, segs := leaderWithSealed(t)
	dir := t.TempDir()
	f := openReplicaLog(t, dir, 1<<20)
	c := copyIn(t, f, segmentBytes(t, leader, segs[0]), rand.New(rand.NewPCG(7, 8)))
	c.closeFiles() // as a crash leaves it: neither installed nor aborted
	f.Close()
	again := openReplicaLog(t, dir, 1<<20)
	if again.NextOffset() != 0 {
		t.Fatalf("an uninstalled copy became records: next %d", again.NextOffset())
	}
	assertUntouched(t, again, dir)
}

// FrameStream accepts a run of bytes, split anywhere, exactly when the whole run is a
// contiguous run of valid frames from the start offset.
func FuzzFrameStream(f *testing.F) {
	one, _ := buildFrames(f, CodecNone, 0, testEntries("a", 2, 10), 1, maxInnerBytes)
	two, _ := buildFrames(f, CodecZstd, 2, testEntries("b", 3, 10), 2, maxInnerBytes)
	good := append(append([]byte(nil), one...), two...)
	f.Add(good, uint64(7))
	f.Add(good[:len(good)-1], uint64(1))
	f.Add(two, uint64(3))
	damaged := append([]byte(nil), good...)
	damaged[40] ^= 1
	f.Add(damaged, uint64(11))
	f.Add([]byte{0xCA, 0xFE}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed))
		s := FrameStream{}
		var err error
		for rest := b; len(rest) > 0 && err == nil; {
			n := min(len(rest), 1+rng.IntN(64))
			err = s.Write(rest[:n])
			rest = rest[n:]
		}
		want, wantEnd := wholeRun(b)
		got := err == nil && s.Whole()
		if got != want {
			t.Fatalf("stream accepted %v (err %v, whole %v), whole-buffer check %v", got, err, s.Whole(), want)
		}
		if got && s.Next != wantEnd {
			t.Fatalf("stream ends at %d, whole-buffer check at %d", s.Next, wantEnd)
		}
	})
}

// wholeRun checks b as a run of frames from offset 0 with checkFrame.
func wholeRun(b []byte) (bool, int64) {
	next := int64(0)
	for len(b) > 0 {
		h, err := checkFrame(b)
		if err != nil || h.base != next {
			return false, 0
		}
		next = h.end()
		b = b[h.size():]
	}
	return true, next
}

// copyThenNext opens a log in dir, copies the leader's first segment into it uninstalled, and
// begins the copy of the next one behind it.
func copyThenNext(t *testing.T, dir string, leader *Log, segs []SegmentInfo, rng *rand.Rand) (f *Log, first, second *SegmentCopy) {
	t.Helper()
	f = openReplicaLog(t, dir, 1<<20)
	first = copyIn(t, f, segmentBytes(t, leader, segs[0]), rng)
	second, err := f.BeginSegmentCopyAfter(first)
	if err != nil {
		t.Fatal(err)
	}
	return f, first, second
}

// TestSegmentCopyAfterStreamsAheadOfTheInstall: the next segment's copy begins where an
// uninstalled copy ends, cannot be installed before it, and installs once it has; a copy
// that does not end on a frame has no successor.
func TestSegmentCopyAfterStreamsAheadOfTheInstall(t *testing.T) {
	leader, segs := leaderWithSealed(t)
	rng := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	f, first, second := copyThenNext(t, dir, leader, segs, rng)
	if second.Base() != segs[1].Base {
		t.Fatalf("the next copy starts at %d, the leader's second segment at %d", second.Base(), segs[1].Base)
	}
	b := segmentBytes(t, leader, segs[1])
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(700))
		if err := second.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if _, err := second.Install(); !errors.Is(err, ErrNotEmptyActive) {
		t.Fatalf("Install ahead of the previous copy = %v, want ErrNotEmptyActive", err)
	}
	// The refused install left the copy whole: a new one over the same bytes installs in order.
	second.Abort()
	if _, err := first.Install(); err != nil {
		t.Fatal(err)
	}
	again := copyIn(t, f, segmentBytes(t, leader, segs[1]), rng)
	end, err := again.Install()
	if err != nil || end != segs[2].Base || f.NextOffset() != end {
		t.Fatalf("Install of the second segment = %d, %v; want %d", end, err, segs[2].Base)
	}

	g := openReplicaLog(t, t.TempDir(), 1<<20)
	part := copyIn(t, g, segmentBytes(t, leader, segs[0])[:100], rng)
	defer part.Abort()
	if _, err := g.BeginSegmentCopyAfter(part); !errors.Is(err, ErrCopyIncomplete) {
		t.Fatalf("BeginSegmentCopyAfter a partial copy = %v, want ErrCopyIncomplete", err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*tmp-*")); len(tmps) != 0 {
		t.Fatalf("temp files left: %v", tmps)
	}
}

// A crash while the next segment streams behind an install (BeginSegmentCopyAfter) keeps
// what the installs made durable and nothing of the streamed copy: whether the install
// failed after its rename (the copy recovers as the active segment) or completed (the next
// copy's temp file, whole or partial, is removed by Open), the log reopens at the last
// installed copy's end with no temp file left.
func TestPipelinedCopyCrashKeepsOnlyInstalledSegments(t *testing.T) {
	leader, segs := leaderWithSealed(t)
	for _, tc := range []struct {
		name        string
		failInstall bool  // the fault fires inside the first install, after its rename
		streamed    int64 // bytes of the second segment streamed before the crash; -1: all
	}{
		{"install failed, next copy whole", true, -1},
		{"install failed, next copy partial", true, 100},
		{"installed, next copy whole", false, -1},
		{"installed, next copy partial", false, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, uint64(tc.streamed)))
			dir := t.TempDir()
			f, first, second := copyThenNext(t, dir, leader, segs, rng)
			b := segmentBytes(t, leader, segs[1])
			if tc.streamed >= 0 {
				b = b[:tc.streamed]
			}
			if err := second.Write(b); err != nil {
				t.Fatal(err)
			}
			if tc.failInstall {
				armFault(t, FaultInstallSegment, errors.New("injected"))
				if _, err := first.Install(); !errors.Is(err, ErrFailed) {
					t.Fatalf("Install with the fault armed = %v, want ErrFailed", err)
				}
			} else if _, err := first.Install(); err != nil {
				t.Fatal(err)
			}
			second.closeFiles() // the crash: the streamed copy neither installed nor aborted
			f.Close()

			again := openReplicaLog(t, dir, 1<<20)
			if again.NextOffset() != segs[1].Base || again.Failed() {
				t.Fatalf("reopened at %d (failed %v), want the first copy's end %d", again.NextOffset(), again.Failed(), segs[1].Base)
			}
			if err := again.AdvanceHWM(segs[1].Base); err != nil {
				t.Fatal(err)
			}
			for _, off := range []int64{0, segs[1].Base - 1} {
				if r, err := again.Read(off); err != nil || r.Offset != off {
					t.Fatalf("Read(%d) = %+v, %v", off, r, err)
				}
			}
			if tmps, _ := filepath.Glob(filepath.Join(dir, "*tmp-*")); len(tmps) != 0 {
				t.Fatalf("temp files left: %v", tmps)
			}
		})
	}
}
