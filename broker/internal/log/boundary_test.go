package log

import (
	"testing"

	"narad.dev/broker/internal/faults"
)

// makeHiddenTail commits a, then writes b's frames without making them visible (HWM persist
// fails → failed state), and closes: on disk exactly what a crash before the HWM persist
// leaves behind.
func makeHiddenTail(t *testing.T, dir string, opts Options, a, b []Entry) {
	t.Helper()
	l := openT(t, dir, opts)
	commitT(t, l, a, 1)
	faults.Set(FaultBeforeHWMPersist, nil)
	_, err := l.Commit(b, 2)
	faults.Clear(FaultBeforeHWMPersist)
	if err == nil {
		t.Fatal("commit with failing hwm persist succeeded")
	}
	l.Close()
}

// ST-7: with a hidden tail present the committed boundary excludes it: it is the end of the
// last visible frame, not the file size, and a tail that crossed a roll moves the boundary
// segment back.
func TestCommittedBoundaryExcludesHiddenTail(t *testing.T) {
	t.Run("same segment", func(t *testing.T) {
		dir := t.TempDir()
		makeHiddenTail(t, dir, Options{}, testEntries("a", 3, 20), testEntries("b", 3, 20))
		seg := segPaths(t, dir)[0]
		visibleEnd := frameStarts(t, seg)[1]
		l := openT(t, dir, Options{})
		defer closeT(t, l)
		base, pos := l.CommittedBoundary()
		if base != 0 || pos != visibleEnd || pos >= fileSize(t, seg) {
			t.Fatalf("boundary (%d,%d), want (0,%d) below size %d", base, pos, visibleEnd, fileSize(t, seg))
		}
		commitT(t, l, testEntries("c", 1, 20), 3)
		base, pos = l.CommittedBoundary()
		if base != 0 || pos != fileSize(t, seg) {
			t.Fatalf("after a commit boundary (%d,%d), want (0,%d)", base, pos, fileSize(t, seg))
		}
	})
	t.Run("tail crossed a roll", func(t *testing.T) {
		dir := t.TempDir()
		opts := Options{SegmentBytes: 256}
		makeHiddenTail(t, dir, opts, testEntries("a", 4, 40), testEntries("b", 4, 40))
		paths := segPaths(t, dir)
		if len(paths) != 2 {
			t.Fatalf("%d segments, want 2", len(paths))
		}
		l := openT(t, dir, opts)
		defer closeT(t, l)
		// The tail's frame sits in the second segment (base 4 = hwm): boundary is its start.
		base, pos := l.CommittedBoundary()
		if base != 4 || pos != 0 {
			t.Fatalf("boundary (%d,%d), want (4,0)", base, pos)
		}
		if l.HighWatermark() != 4 || l.NextOffset() != 8 {
			t.Fatalf("hwm %d next %d", l.HighWatermark(), l.NextOffset())
		}
	})
}

func TestCommittedBoundaryAtOpenMatchesCommitTracking(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 2048}
	l := openT(t, dir, opts)
	for i := 0; i < 25; i++ {
		commitT(t, l, testEntries("x", 3, 50), int64(i))
	}
	b1, p1 := l.CommittedBoundary()
	closeT(t, l)
	l = openT(t, dir, opts)
	defer closeT(t, l)
	b2, p2 := l.CommittedBoundary()
	if b1 != b2 || p1 != p2 {
		t.Fatalf("tracked boundary (%d,%d) != recomputed (%d,%d)", b1, p1, b2, p2)
	}
}
