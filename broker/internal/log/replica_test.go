package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func openReplicaLog(t *testing.T, dir string, segBytes int64) *Log {
	t.Helper()
	l, err := Open(dir, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestAppendStaysHiddenUntilAdvanceHWM(t *testing.T) {
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 1<<20)
	first, leo, err := l.Append(testEntries("A", 3, 16), 1000)
	if err != nil || first != 0 || leo != 3 {
		t.Fatalf("Append = %d, %d, %v", first, leo, err)
	}
	if _, err := l.Read(0); !errors.Is(err, ErrNotVisible) {
		t.Fatalf("read of an appended record before AdvanceHWM: %v", err)
	}
	if l.HighWatermark() != 0 || l.NextOffset() != 3 {
		t.Fatalf("hwm %d next %d", l.HighWatermark(), l.NextOffset())
	}
	if err := l.AdvanceHWM(3); err != nil {
		t.Fatal(err)
	}
	r, err := l.Read(2)
	if err != nil || string(r.Key) != "k-A-2" {
		t.Fatalf("read after AdvanceHWM: %+v, %v", r, err)
	}
	if err := l.AdvanceHWM(1); err != nil || l.HighWatermark() != 3 {
		t.Fatalf("a lower hwm moved it back: %v, hwm %d", err, l.HighWatermark())
	}
	l.Close()
	again := openReplicaLog(t, dir, 1<<20)
	if again.HighWatermark() != 3 || again.NextOffset() != 3 {
		t.Fatalf("reopened: hwm %d next %d", again.HighWatermark(), again.NextOffset())
	}
}

func TestAdvanceHWMOnlyToAFrameBoundaryWithinTheLog(t *testing.T) {
	l := openReplicaLog(t, t.TempDir(), 1<<20)
	if _, _, err := l.Append(testEntries("A", 3, 16), 1000); err != nil { // one frame: [0, 3)
		t.Fatal(err)
	}
	if _, _, err := l.Append(testEntries("B", 2, 16), 1000); err != nil { // [3, 5)
		t.Fatal(err)
	}
	for _, h := range []int64{1, 2, 4} {
		if err := l.AdvanceHWM(h); !errors.Is(err, ErrNotFrameBoundary) {
			t.Errorf("AdvanceHWM(%d) = %v, want ErrNotFrameBoundary", h, err)
		}
	}
	if err := l.AdvanceHWM(6); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("AdvanceHWM past the end: %v", err)
	}
	if l.HighWatermark() != 0 {
		t.Fatalf("a refused advance moved the hwm to %d", l.HighWatermark())
	}
	if err := l.AdvanceHWM(3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(3); !errors.Is(err, ErrNotVisible) {
		t.Fatalf("record above the hwm: %v", err)
	}
	if seg, pos := l.CommittedBoundary(); seg != 0 || pos == 0 {
		t.Fatalf("committed boundary %d:%d", seg, pos)
	}
}

// A follower that copies the leader's frames with ReadFrames/AppendFrames, in small reads
// across segment rolls, holds the same records at the same offsets.
func TestFollowerCopiesTheLeadersFramesByteForByte(t *testing.T) {
	leader := openReplicaLog(t, t.TempDir(), 4096)
	follower := openReplicaLog(t, t.TempDir(), 4096)
	for i := range 40 {
		if _, _, err := leader.Append(testEntries(string(rune('a'+i%26)), 1+i%4, 100+i*7), int64(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	leo := leader.NextOffset()
	reads := 0
	for follower.NextOffset() < leo {
		frames, next, err := leader.ReadFrames(follower.NextOffset(), 700)
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) == 0 {
			t.Fatalf("no frames at %d < %d", follower.NextOffset(), leo)
		}
		got, err := follower.AppendFrames(frames)
		if err != nil || got != next {
			t.Fatalf("AppendFrames = %d, %v; ReadFrames said next %d", got, err, next)
		}
		reads++
	}
	if reads < 5 {
		t.Fatalf("only %d reads: the byte limit was not honoured", reads)
	}
	if frames, next, err := leader.ReadFrames(leo, 700); err != nil || len(frames) != 0 || next != leo {
		t.Fatalf("read at the end: %d bytes, next %d, %v", len(frames), next, err)
	}
	for _, l := range []*Log{leader, follower} {
		if err := l.AdvanceHWM(leo); err != nil {
			t.Fatal(err)
		}
	}
	for off := int64(0); off < leo; off++ {
		a, err := leader.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		b, err := follower.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Payload, b.Payload) || a.CommittedAt != b.CommittedAt {
			t.Fatalf("offset %d differs: %+v vs %+v", off, a, b)
		}
	}
	whole, _, err := leader.ReadFrames(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	copied, _, err := follower.ReadFrames(0, 1<<30)
	if err != nil || !bytes.Equal(whole, copied) {
		t.Fatalf("the follower's frames differ from the leader's (%d vs %d bytes, %v)", len(copied), len(whole), err)
	}
}

func TestAppendFramesRefusesGapsAndDamage(t *testing.T) {
	leader := openReplicaLog(t, t.TempDir(), 1<<20)
	if _, _, err := leader.Append(testEntries("A", 2, 16), 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := leader.Append(testEntries("B", 2, 16), 2); err != nil {
		t.Fatal(err)
	}
	first, _, err := leader.ReadFrames(0, 1) // one frame: [0, 2)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := leader.ReadFrames(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	follower := openReplicaLog(t, t.TempDir(), 1<<20)
	if _, err := follower.AppendFrames(second); !errors.Is(err, ErrNotContiguous) {
		t.Fatalf("frames from offset 2 onto an empty log: %v", err)
	}
	damaged := append([]byte(nil), first...)
	damaged[len(damaged)-1] ^= 1
	if _, err := follower.AppendFrames(damaged); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("damaged frame: %v", err)
	}
	if _, err := follower.AppendFrames(append(append([]byte(nil), first...), first...)); !errors.Is(err, ErrNotContiguous) {
		t.Fatalf("a frame repeated: %v", err)
	}
	if follower.NextOffset() != 0 {
		t.Fatalf("refused frames moved the end offset to %d", follower.NextOffset())
	}
	if leo, err := follower.AppendFrames(append(append([]byte(nil), first...), second...)); err != nil || leo != 4 {
		t.Fatalf("good frames: %d, %v", leo, err)
	}
}

// A follower catching up appends megabytes per call: AppendFrames writes the frames from the
// caller's buffer and verifies into it, so it allocates no copy of them.
func TestAppendFramesWritesWithoutCopyingTheFrames(t *testing.T) {
	leader := openReplicaLog(t, t.TempDir(), 64<<20)
	for i := range 6 {
		if _, _, err := leader.Append(testEntries(string(rune('a'+i)), 16, 64<<10), 1); err != nil {
			t.Fatal(err)
		}
	}
	frames, next, err := leader.ReadFrames(0, 64<<20)
	if err != nil || next != 96 {
		t.Fatalf("ReadFrames: next %d, %v", next, err)
	}
	follower := openReplicaLog(t, t.TempDir(), 64<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	leo, err := follower.AppendFrames(frames)
	runtime.ReadMemStats(&after)
	if err != nil || leo != 96 {
		t.Fatalf("AppendFrames = %d, %v", leo, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(frames))/4 {
		t.Fatalf("appending %d bytes of frames allocated %d bytes", len(frames), n)
	}
	copied, _, err := follower.ReadFrames(0, 64<<20)
	if err != nil || !bytes.Equal(copied, frames) {
		t.Fatalf("the follower's frames differ from the leader's (%d vs %d bytes, %v)", len(copied), len(frames), err)
	}
}

// ReadFramesAppend reads what ReadFrames reads into the given buffer, after what it holds,
// reusing its capacity: a leader reads catch-up answers into recycled buffers.
func TestReadFramesAppendReusesTheBuffer(t *testing.T) {
	leader := openReplicaLog(t, t.TempDir(), 4096)
	for i := range 20 {
		if _, _, err := leader.Append(testEntries(string(rune('a'+i)), 2, 300), 1); err != nil {
			t.Fatal(err)
		}
	}
	want, wantNext, err := leader.ReadFrames(6, 5000)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3, 1<<20)
	copy(buf, "abc")
	got, next, err := leader.ReadFramesAppend(buf, 6, 5000)
	if err != nil || next != wantNext {
		t.Fatalf("ReadFramesAppend: next %d (ReadFrames %d), %v", next, wantNext, err)
	}
	if string(got[:3]) != "abc" || !bytes.Equal(got[3:], want) {
		t.Fatalf("appended %d bytes after %q; ReadFrames read %d", len(got)-3, got[:3], len(want))
	}
	if unsafe.SliceData(got) != unsafe.SliceData(buf) {
		t.Fatal("the frames went into a new buffer although the given one had room")
	}
	if got, next, err := leader.ReadFramesAppend(buf[:0], leader.NextOffset(), 5000); err != nil || len(got) != 0 ||
		next != leader.NextOffset() {
		t.Fatalf("at the end: %d bytes, next %d, %v", len(got), next, err)
	}
}

func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}

// TruncateTail removes a hidden suffix that spans several segments; the log goes on from the
// cut with other records, and reopens as it was left.
func TestTruncateTailAcrossSegmentsAndTheLogGoesOn(t *testing.T) {
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 2048)
	if _, err := l.Commit(testEntries("C", 5, 100), 1); err != nil {
		t.Fatal(err)
	}
	var bounds []int64
	for i := range 30 {
		_, leo, err := l.Append(testEntries("H", 2, 150), int64(10+i))
		if err != nil {
			t.Fatal(err)
		}
		bounds = append(bounds, leo)
	}
	before := segmentCount(t, dir)
	if err := l.TruncateTail(3); !errors.Is(err, ErrBelowHWM) {
		t.Fatalf("truncate below the hwm: %v", err)
	}
	if err := l.TruncateTail(bounds[3] + 1); !errors.Is(err, ErrNotFrameBoundary) {
		t.Fatalf("truncate inside a frame: %v", err)
	}
	cut := bounds[4]
	if err := l.TruncateTail(cut); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != cut || l.HighWatermark() != 5 {
		t.Fatalf("after truncate: next %d hwm %d", l.NextOffset(), l.HighWatermark())
	}
	if after := segmentCount(t, dir); after >= before {
		t.Fatalf("segments %d → %d: nothing removed", before, after)
	}
	if frames, next, err := l.ReadFrames(cut, 1<<20); err != nil || len(frames) != 0 || next != cut {
		t.Fatalf("frames past the cut: %d bytes, %v", len(frames), err)
	}
	first, leo, err := l.Append(testEntries("N", 3, 150), 99)
	if err != nil || first != cut {
		t.Fatalf("append after the cut: first %d, %v", first, err)
	}
	if err := l.AdvanceHWM(leo); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		for off := int64(0); off < leo; off++ {
			r, err := l.Read(off)
			if err != nil {
				t.Fatalf("read %d: %v", off, err)
			}
			tag := "H"
			switch {
			case off < 5:
				tag = "C"
			case off >= cut:
				tag = "N"
			}
			if r.Key[2] != tag[0] {
				t.Fatalf("offset %d holds %q, want a %s record", off, r.Key, tag)
			}
		}
	}
	check(l)
	l.Close()
	again := openReplicaLog(t, dir, 2048)
	if again.NextOffset() != leo || again.HighWatermark() != leo {
		t.Fatalf("reopened: next %d hwm %d, want %d", again.NextOffset(), again.HighWatermark(), leo)
	}
	check(again)
}

// A truncation that makes a sealed segment the active one leaves it writable after a
// restart too (its file is the last one).
func TestTruncateIntoASealedSegmentThenReopen(t *testing.T) {
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 1024)
	var bounds []int64
	for i := range 12 {
		_, leo, err := l.Append(testEntries("H", 1, 300), int64(i))
		if err != nil {
			t.Fatal(err)
		}
		bounds = append(bounds, leo)
	}
	if segmentCount(t, dir) < 3 {
		t.Fatal("test needs several segments")
	}
	if err := l.TruncateTail(bounds[0]); err != nil {
		t.Fatal(err)
	}
	if n := segmentCount(t, dir); n != 1 {
		t.Fatalf("%d segments left, want 1", n)
	}
	_, leo, err := l.Append(testEntries("N", 1, 300), 50)
	if err != nil {
		t.Fatalf("append into the re-opened segment: %v", err)
	}
	if err := l.AdvanceHWM(leo); err != nil {
		t.Fatal(err)
	}
	l.Close()
	again := openReplicaLog(t, dir, 1024)
	if again.NextOffset() != leo || again.HighWatermark() != leo {
		t.Fatalf("reopened next %d hwm %d, want %d", again.NextOffset(), again.HighWatermark(), leo)
	}
	if r, err := again.Read(bounds[0]); err != nil || string(r.Key) != "k-N-0" {
		t.Fatalf("the record appended after the cut: %+v, %v", r, err)
	}
	frames, _, err := again.ReadFrames(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, SegmentFileName(0)))
	if err != nil || fi.Size() != int64(len(frames)) {
		t.Fatalf("segment holds %d bytes for %d bytes of frames (%v): a gap was written", fi.Size(), len(frames), err)
	}
}

// Whatever bytes a peer sends as replicated frames, AppendFrames either refuses them and
// leaves the log as it was, or appends records that read back after AdvanceHWM.
func FuzzAppendFrames(f *testing.F) {
	src, err := Open(f.TempDir(), Options{SegmentBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := src.Append(testEntries("A", 3, 20), 7); err != nil {
		f.Fatal(err)
	}
	good, _, err := src.ReadFrames(0, 1<<20)
	src.Close()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Open(t.TempDir(), Options{SegmentBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		leo, err := l.AppendFrames(b)
		if err != nil {
			if l.NextOffset() != 0 || l.Failed() {
				t.Fatalf("refused frames changed the log: next %d failed %v", l.NextOffset(), l.Failed())
			}
			return
		}
		if err := l.AdvanceHWM(leo); err != nil {
			t.Fatal(err)
		}
		for off := range leo {
			if _, err := l.Read(off); err != nil && !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("read %d: %v", off, err)
			}
		}
	})
}

// A crash inside TruncateTail, after the later segments are gone and before the segment
// holding the cut is truncated, leaves a contiguous log above the HWM that truncates again.
func TestCrashInsideTruncateTailLeavesAContiguousLog(t *testing.T) {
	dir := t.TempDir()
	runKilled(t, "truncate-tail", dir, "NARAD_FAULTS="+FaultTruncateTail+"=crash@1")
	l := openReplicaLog(t, dir, 2048)
	if l.HighWatermark() != 2 {
		t.Fatalf("hwm %d after the crash, want 2", l.HighWatermark())
	}
	leo := l.NextOffset()
	if leo < 5 || leo >= 22 {
		t.Fatalf("end offset %d after the crash: want the end of the segment holding 5", leo)
	}
	frames, next, err := l.ReadFrames(0, 1<<20)
	if err != nil || next != leo || len(frames) == 0 {
		t.Fatalf("frames to %d of %d (%v): the log is not contiguous", next, leo, err)
	}
	if err := l.TruncateTail(5); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 5 || segmentCount(t, dir) != 1 {
		t.Fatalf("after the second truncate: end %d, %d segments", l.NextOffset(), segmentCount(t, dir))
	}
}

// AdvanceHWM writes the new HWM to the hwm file before it moves, without an fdatasync: what a
// process crash leaves on disk is the value, at no fsync's cost.
func TestAdvanceHWMWritesTheFileWithoutAnFsync(t *testing.T) {
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 1<<20)
	if _, _, err := l.Append(testEntries("A", 3, 16), 1000); err != nil {
		t.Fatal(err)
	}
	syncs := l.hwmf.syncs
	if err := l.AdvanceHWM(3); err != nil {
		t.Fatal(err)
	}
	if l.hwmf.syncs != syncs {
		t.Fatalf("AdvanceHWM made %d hwm fsyncs, want none", l.hwmf.syncs-syncs)
	}
	st, err := readHWMFile(dir)
	if err != nil || !st.present || st.hwm != 3 || st.clean {
		t.Fatalf("hwm file after AdvanceHWM: %+v, %v", st, err)
	}
	// A commit (R = 1's path) still persists durably.
	if _, err := l.Commit(testEntries("B", 1, 16), 1001); err != nil {
		t.Fatal(err)
	}
	if l.hwmf.syncs != syncs+1 {
		t.Fatalf("Commit made %d hwm fsyncs, want 1", l.hwmf.syncs-syncs)
	}
}

// blockingObserver holds an append between its write and its fsync (ObserveFlush runs there,
// under the write lock) while armed.
type blockingObserver struct {
	nopObserver
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (o *blockingObserver) ObserveFlush(time.Duration, int) {
	if o.armed.Load() {
		o.entered <- struct{}{}
		<-o.release
	}
}

// The HWM moves while an append is on disk: AdvanceHWM does not wait for the write lock, and
// checks h against the end offset of what is durable.
func TestAdvanceHWMDoesNotWaitForAnAppendOnDisk(t *testing.T) {
	obs := &blockingObserver{entered: make(chan struct{}), release: make(chan struct{})}
	l, err := Open(t.TempDir(), Options{SegmentBytes: 1 << 20, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, _, err := l.Append(testEntries("A", 3, 16), 1000); err != nil {
		t.Fatal(err)
	}
	obs.armed.Store(true)
	appended := make(chan error, 1)
	go func() {
		_, _, err := l.Append(testEntries("B", 3, 16), 1001)
		appended <- err
	}()
	<-obs.entered // B is written, not yet fsynced; the write lock is held
	obs.armed.Store(false)
	advanced := make(chan error, 1)
	go func() { advanced <- l.AdvanceHWM(3) }()
	select {
	case err := <-advanced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(obs.release)
		t.Fatal("AdvanceHWM waited for the append on disk")
	}
	if r, err := l.Read(2); err != nil || string(r.Key) != "k-A-2" || l.HighWatermark() != 3 {
		t.Fatalf("after the advance: %+v, %v, hwm %d", r, err, l.HighWatermark())
	}
	if err := l.AdvanceHWM(6); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("advance past what is durable: %v", err)
	}
	close(obs.release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if err := l.AdvanceHWM(6); err != nil || l.HighWatermark() != 6 {
		t.Fatalf("advance after the append: %v, hwm %d", err, l.HighWatermark())
	}
}

// wantBoundary is the committed boundary a header walk finds for h.
func wantBoundary(t *testing.T, l *Log, h int64) boundaryPos {
	t.Helper()
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	defer l.mu.RUnlock()
	b, err := l.computeBoundary(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAdvanceHWMToARecentAppendEndWalksNoHeaders: an HWM moved to where a recent append ended
// takes the boundary the append recorded, the same one a walk finds, across segment rolls; an
// older end is walked to; a truncation forgets the ends, so a reused offset inside a new
// frame is still refused.
func TestAdvanceHWMToARecentAppendEndWalksNoHeaders(t *testing.T) {
	l := openReplicaLog(t, t.TempDir(), 4096)
	var ends []int64
	for i := range 3 * appendEndsKept {
		_, leo, err := l.Append(testEntries(string(rune('a'+i%26)), 1+i%3, 90+i%50), int64(1000+i))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, leo)
	}
	if len(l.segs) < 4 {
		t.Fatalf("the test needs segment rolls, has %d segments", len(l.segs))
	}
	old := ends[len(ends)-appendEndsKept-1] // evicted
	if err := l.AdvanceHWM(old); err != nil {
		t.Fatal(err)
	}
	if l.walks != 1 || *l.bound.Load() != wantBoundary(t, l, old) {
		t.Fatalf("an evicted end: %d walks, boundary %+v, walked %+v", l.walks, *l.bound.Load(), wantBoundary(t, l, old))
	}
	rolled := 0
	for _, h := range ends[len(ends)-appendEndsKept:] {
		if err := l.AdvanceHWM(h); err != nil {
			t.Fatal(err)
		}
		if got, want := *l.bound.Load(), wantBoundary(t, l, h); got != want {
			t.Fatalf("AdvanceHWM(%d): boundary %+v, a walk finds %+v", h, got, want)
		}
		if b := l.bound.Load(); b.pos == 0 {
			rolled++ // an end where the segment rolled: its boundary is the next segment's start
		}
	}
	if l.walks != 1+rolled {
		t.Fatalf("%d walks for %d recent ends of which %d at a roll, want %d", l.walks, appendEndsKept, rolled, 1+rolled)
	}

	m := openReplicaLog(t, t.TempDir(), 1<<20)
	for _, tag := range []string{"A", "B", "C"} { // frames [0,1) [1,2) [2,3)
		if _, _, err := m.Append(testEntries(tag, 1, 40), 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.TruncateTail(1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Append(testEntries("D", 3, 40), 1000); err != nil { // one frame [1,4)
		t.Fatal(err)
	}
	if err := m.AdvanceHWM(2); !errors.Is(err, ErrNotFrameBoundary) {
		t.Fatalf("AdvanceHWM(2) inside the new frame = %v, want ErrNotFrameBoundary", err)
	}
	if err := m.AdvanceHWM(4); err != nil || *m.bound.Load() != wantBoundary(t, m, 4) {
		t.Fatalf("AdvanceHWM(4) = %v, boundary %+v", err, *m.bound.Load())
	}
}

// A follower's fetch from where an append ended is read in one piece (readTail); it returns
// exactly what the walk from the index returns, for every append end and byte bound, in a log
// whose appends (one to five frames, leader and follower style) roll segments, and it serves
// the fetches at the tail: the walk is left for offsets it does not know.
func TestTailReadsMatchTheWalk(t *testing.T) {
	leader := openReplicaLog(t, t.TempDir(), 8192)
	follower := openReplicaLog(t, t.TempDir(), 8192)
	var ends []int64
	for i := range 60 {
		entries := testEntries(string(rune('a'+i%26)), 1+i%3, 40+(i*37)%400)
		if _, leo, err := leader.Append(entries, int64(i)); err != nil {
			t.Fatal(err)
		} else {
			ends = append(ends, leo)
		}
		if i%5 == 4 { // a follower's append of several frames at once
			frames, _, err := leader.ReadFrames(follower.NextOffset(), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := follower.AppendFrames(frames); err != nil {
				t.Fatal(err)
			}
		}
	}
	tailReads := 0
	for _, l := range []*Log{leader, follower} {
		leo := l.NextOffset()
		for from := int64(0); from < leo; from++ {
			for _, maxBytes := range []int{1, 100, 300, 700, 2000, 1 << 20} {
				l.mu.RLock()
				wantFrames, wantNext, wantErr := l.readWalk(nil, from, leo, maxBytes)
				got, next, ok, err := l.readTail([]byte("x"), from, leo, maxBytes)
				l.mu.RUnlock()
				if err != nil {
					t.Fatalf("readTail(%d, %d): %v", from, maxBytes, err)
				}
				if !ok {
					continue
				}
				tailReads++
				if wantErr != nil || next != wantNext || string(got[:1]) != "x" || !bytes.Equal(got[1:], wantFrames) {
					t.Fatalf("from %d, max %d: tail read %d bytes to %d, walk %d bytes to %d (%v)",
						from, maxBytes, len(got)-1, next, len(wantFrames), wantNext, wantErr)
				}
			}
		}
	}
	if tailReads == 0 {
		t.Fatal("no read took the tail path")
	}
	// A fetch from the leader's latest append ends goes the tail path.
	leader.mu.RLock()
	defer leader.mu.RUnlock()
	for _, from := range ends[len(ends)-5 : len(ends)-1] {
		if _, _, ok, err := leader.readTail(nil, from, leader.nextA.Load(), 1<<20); !ok || err != nil {
			t.Fatalf("a fetch from the append end %d walked (%v)", from, err)
		}
	}
}
