package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"narad.dev/broker/internal/durable"
)

// buildLog commits batches (one frame each) into a fresh log in dir and closes it. It returns
// the offset after each batch.
func buildLog(t testing.TB, dir string, segBytes int64, batches ...int) []int64 {
	t.Helper()
	l, err := Open(dir, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	var ends []int64
	for i, n := range batches {
		first, err := l.Commit(testEntries(string(rune('A'+i)), n, 40), int64(1000+i))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, first+int64(n))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return ends
}

func TestWriteHWMFileIsReadBackExactlyAndClean(t *testing.T) {
	for _, tc := range []struct {
		hwm   int64
		clean bool
	}{{0, true}, {5, true}, {1 << 40, false}} {
		dir := t.TempDir()
		if err := WriteHWMFile(dir, tc.hwm, tc.clean); err != nil {
			t.Fatal(err)
		}
		st := readHWMT(t, dir)
		if !st.present || st.hwm != tc.hwm || st.clean != tc.clean || st.legacy {
			t.Fatalf("WriteHWMFile(%d, %v) reads back %+v", tc.hwm, tc.clean, st)
		}
	}
}

func TestWriteHWMFileNeverCreatesAMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	if err := WriteHWMFile(dir, 3, true); !errors.Is(err, durable.ErrDirMissing) {
		t.Fatalf("want ErrDirMissing, got %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory was created: %v", err)
	}
}

func TestWriteHWMFileRejectsNegative(t *testing.T) {
	if err := WriteHWMFile(t.TempDir(), -1, true); err == nil {
		t.Fatal("a negative hwm was written")
	}
}

func TestCutTailRecoversExactlyToTheHWM(t *testing.T) {
	dir := t.TempDir()
	ends := buildLog(t, dir, 0, 3, 2, 4) // one segment: frames [0,3) [3,5) [5,9)
	before, err := os.ReadFile(segPaths(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHWMFile(dir, ends[0], true); err != nil { // a copy listed past its hwm
		t.Fatal(err)
	}
	cut, err := CutTail(dir, ends[0])
	if err != nil || !cut {
		t.Fatalf("CutTail = %v, %v; want a cut", cut, err)
	}
	after, err := os.ReadFile(segPaths(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(after) >= len(before) || !bytes.Equal(after, before[:len(after)]) {
		t.Fatalf("cut must keep an exact prefix: %d → %d bytes", len(before), len(after))
	}
	l := openT(t, dir, Options{})
	defer closeT(t, l)
	if l.NextOffset() != ends[0] || l.HighWatermark() != ends[0] {
		t.Fatalf("recovered next=%d hwm=%d, want both %d", l.NextOffset(), l.HighWatermark(), ends[0])
	}
	es := testEntries("A", 3, 40)
	for i := range es {
		expectRecord(t, l, int64(i), es[i], 1000)
	}
}

func TestCutTailRemovesSegmentsPastTheBoundary(t *testing.T) {
	dir := t.TempDir()
	ends := buildLog(t, dir, 200, 3, 3, 3, 3) // small segments: rolls after each commit
	if n := len(segPaths(t, dir)); n < 3 {
		t.Fatalf("setup: want several segments, got %d", n)
	}
	hwm := ends[1]
	cut, err := CutTail(dir, hwm)
	if err != nil || !cut {
		t.Fatalf("CutTail = %v, %v", cut, err)
	}
	for _, p := range segPaths(t, dir) {
		base, _ := ParseSegmentFileName(filepath.Base(p))
		if base > hwm {
			t.Fatalf("segment %s past the hwm survived", p)
		}
	}
	l := openT(t, dir, Options{})
	defer closeT(t, l)
	if l.NextOffset() != hwm {
		t.Fatalf("recovered next=%d, want %d", l.NextOffset(), hwm)
	}
}

func TestCutTailAtTheTailChangesNothing(t *testing.T) {
	dir := t.TempDir()
	ends := buildLog(t, dir, 0, 2, 2)
	seg := segPaths(t, dir)[0]
	size := fileSize(t, seg)
	cut, err := CutTail(dir, ends[1])
	if err != nil || cut {
		t.Fatalf("CutTail at the tail = %v, %v; want no cut", cut, err)
	}
	if fileSize(t, seg) != size {
		t.Fatal("the segment changed")
	}
}

func TestCutTailOfAnEmptyDirIsANoop(t *testing.T) {
	cut, err := CutTail(t.TempDir(), 7)
	if err != nil || cut {
		t.Fatalf("CutTail of an empty dir = %v, %v", cut, err)
	}
}

func TestCutTailRefusesAHWMBelowEverySegment(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SegmentFileName(10)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CutTail(dir, 5); err == nil {
		t.Fatal("a hwm below the first segment's base must be refused")
	}
	if _, err := CutTail(dir, -1); err == nil {
		t.Fatal("a negative hwm must be refused")
	}
}

func TestCutTailNeverStepsOverDamageBelowTheHWM(t *testing.T) {
	dir := t.TempDir()
	ends := buildLog(t, dir, 0, 2, 2, 2)
	seg := segPaths(t, dir)[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[frameHeaderSize+3] ^= 0xFF // damage the first frame's payload: its CRC fails
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cut, err := CutTail(dir, ends[1])
	if err != nil || !cut {
		t.Fatalf("CutTail = %v, %v", cut, err)
	}
	after, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, b[:len(after)]) || len(after) == 0 {
		t.Fatal("the cut must keep the damaged frame and everything below the hwm")
	}
	l := openT(t, dir, Options{})
	defer closeT(t, l)
	if l.NextOffset() != ends[1] {
		t.Fatalf("recovered next=%d, want %d", l.NextOffset(), ends[1])
	}
}

// FuzzCutTail: whatever bytes a segment holds, CutTail never grows it and keeps a prefix.
func FuzzCutTail(f *testing.F) {
	dir := f.TempDir()
	buildLog(f, dir, 0, 2, 3)
	seed, _ := os.ReadFile(filepath.Join(dir, SegmentFileName(0)))
	f.Add(seed, int64(2))
	f.Add(seed, int64(0))
	f.Add(seed, int64(9))
	f.Add([]byte{0xCA, 0xFE, 0, 0}, int64(1))
	f.Add([]byte{}, int64(0))
	d := f.TempDir() // one per fuzz worker process, reused by every input
	f.Fuzz(func(t *testing.T, b []byte, hwm int64) {
		if hwm < 0 {
			hwm = -hwm
			if hwm < 0 {
				hwm = 0
			}
		}
		path := filepath.Join(d, SegmentFileName(0))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := CutTail(d, hwm); err != nil {
			t.Fatalf("CutTail: %v", err)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) > len(b) || !bytes.Equal(after, b[:len(after)]) {
			t.Fatalf("CutTail did not keep a prefix: %d → %d bytes", len(b), len(after))
		}
		// Whatever bytes the segment holds, VerifyTail answers without changing them, and a
		// tail it accepts ends where the segment's whole frames end.
		next, vh, err := VerifyTail(d)
		if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
			t.Fatal("VerifyTail changed the segment")
		}
		if err == nil && (vh > next || next < 0) {
			t.Fatalf("VerifyTail = (%d, %d): hwm past next", next, vh)
		}
	})
}

// VerifyTail reports what Open would recover (next offset, HWM clamped to it) without
// changing the directory, reading only the active segment.
func TestVerifyTailAgreesWithOpenAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	ends := buildLog(t, dir, 512, 5, 5, 5, 5, 5) // several segments
	if len(segPaths(t, dir)) < 3 {
		t.Fatalf("want several segments, got %d", len(segPaths(t, dir)))
	}
	for _, hwm := range []int64{ends[len(ends)-1], ends[len(ends)-2]} { // exact, and a hidden tail
		if err := WriteHWMFile(dir, hwm, true); err != nil {
			t.Fatal(err)
		}
		hwmBytes, err := os.ReadFile(filepath.Join(dir, HWMFileName))
		if err != nil {
			t.Fatal(err)
		}
		next, got, err := VerifyTail(dir)
		if err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(filepath.Join(dir, HWMFileName))
		if err != nil || !bytes.Equal(after, hwmBytes) {
			t.Fatalf("VerifyTail changed the hwm file: %v", err)
		}
		l := openT(t, dir, Options{})
		wantNext, wantHWM := l.NextOffset(), l.HighWatermark()
		closeT(t, l)
		if next != wantNext || got != wantHWM {
			t.Fatalf("hwm %d: VerifyTail = (%d, %d), Open recovers (%d, %d)", hwm, next, got, wantNext, wantHWM)
		}
	}
}

func TestVerifyTailSkipsSealedSegmentsAndRefusesATornActiveTail(t *testing.T) {
	dir := t.TempDir()
	ends := buildLog(t, dir, 512, 5, 5, 5, 5, 5)
	paths := segPaths(t, dir)
	// Damage in a sealed segment is the new owner's recovery's business, not the verify's.
	if err := os.WriteFile(paths[0], bytes.Repeat([]byte{0xee}, int(fileSize(t, paths[0]))), 0o644); err != nil {
		t.Fatal(err)
	}
	if next, _, err := VerifyTail(dir); err != nil || next != ends[len(ends)-1] {
		t.Fatalf("VerifyTail with a damaged sealed segment = %d, %v; want %d", next, err, ends[len(ends)-1])
	}
	// Bytes past the last whole frame of the active segment are not a valid copy.
	f, err := os.OpenFile(paths[len(paths)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := VerifyTail(dir); !errors.Is(err, ErrTornCopy) {
		t.Fatalf("VerifyTail of a torn active segment: %v, want ErrTornCopy", err)
	}
	// No hwm file: everything recovered is visible, as Open has it.
	empty := t.TempDir()
	buildLog(t, empty, 0, 4)
	if err := os.Remove(filepath.Join(empty, HWMFileName)); err != nil {
		t.Fatal(err)
	}
	if next, hwm, err := VerifyTail(empty); err != nil || next != 4 || hwm != 4 {
		t.Fatalf("VerifyTail without an hwm file = (%d, %d, %v), want (4, 4)", next, hwm, err)
	}
}
