package log

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fillSegments commits until dir has at least n segments (SegmentBytes 512) and returns the
// log, still open.
func fillSegments(t *testing.T, dir string, n int) *Log {
	t.Helper()
	l := openT(t, dir, Options{SegmentBytes: 512})
	for i := 0; l.Stats().Segments < n; i++ {
		commitT(t, l, testEntries("r", 5, 100), int64(i))
	}
	return l
}

func ageFile(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// ST-8: retention deletes only sealed segments whose mtime is older than retention; the
// active segment is never deleted, however old.
func TestRetentionDeletesOnlyExpiredSealedSegments(t *testing.T) {
	dir := t.TempDir()
	l := fillSegments(t, dir, 4)
	defer closeT(t, l)
	now := time.Now()
	paths := segPaths(t, dir)
	old := now.Add(-2 * time.Hour)
	ageFile(t, paths[0], old)
	ageFile(t, paths[1], old)
	ageFile(t, paths[len(paths)-1], old) // active: never deleted
	const ret = int64(time.Hour / time.Millisecond)

	if l.RetentionOwed(0, now) {
		t.Fatal("retention 0 (keep forever) owes deletions")
	}
	if !l.RetentionOwed(ret, now) {
		t.Fatal("expired sealed segments but RetentionOwed is false")
	}
	if _, err := l.Read(1); err != nil { // warm caches for a segment that will go
		t.Fatal(err)
	}
	size0, size1 := fileSize(t, paths[0]), fileSize(t, paths[1])
	base2, _ := ParseSegmentFileName(filepath.Base(paths[2]))

	res, err := l.ApplyRetention(ret, now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 2 || res.Bytes != size0+size1 || res.Messages != base2 {
		t.Fatalf("result %+v, want 2 segments, %d bytes, %d messages", res, size0+size1, base2)
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if gone := errors.Is(err, os.ErrNotExist); gone != (i < 2) {
			t.Fatalf("segment %d gone=%v", i, gone)
		}
	}
	if l.OldestOffset() != base2 {
		t.Fatalf("oldest %d, want %d", l.OldestOffset(), base2)
	}
	if _, err := l.Read(1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read of a deleted offset: %v", err)
	}
	if _, err := l.Read(base2); err != nil {
		t.Fatalf("Read(%d) after retention: %v", base2, err)
	}
	if l.RetentionOwed(ret, now) {
		t.Fatal("RetentionOwed after deleting everything expired")
	}
	if res, _ := l.ApplyRetention(0, now.Add(1000*time.Hour)); res.Segments != 0 {
		t.Fatal("retention 0 deleted segments")
	}
}

func TestRetentionStopsAtFirstUnexpiredSegment(t *testing.T) {
	dir := t.TempDir()
	l := fillSegments(t, dir, 4)
	defer closeT(t, l)
	now := time.Now()
	paths := segPaths(t, dir)
	ageFile(t, paths[1], now.Add(-2*time.Hour)) // the second is old, the first is not
	res, err := l.ApplyRetention(int64(time.Hour/time.Millisecond), now)
	if err != nil || res.Segments != 0 {
		t.Fatalf("deleted %+v (%v): retained offsets must stay contiguous", res, err)
	}
}

// ST-9: the cold retention walk deletes expired sealed segments of a closed log without
// opening it: the hwm file and the active segment are untouched.
func TestColdRetentionDeletesWithoutOpening(t *testing.T) {
	dir := t.TempDir()
	l := fillSegments(t, dir, 3)
	closeT(t, l)
	paths := segPaths(t, dir)
	now := time.Now()
	for _, p := range paths {
		ageFile(t, p, now.Add(-3*time.Hour))
	}
	hwmPath := filepath.Join(dir, HWMFileName)
	hwmBefore, _ := os.ReadFile(hwmPath)
	hwmInfo, _ := os.Stat(hwmPath)
	activeBefore, _ := os.ReadFile(paths[len(paths)-1])

	res, err := ColdRetention(dir, int64(time.Hour/time.Millisecond), now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != len(paths)-1 {
		t.Fatalf("deleted %d segments, want %d", res.Segments, len(paths)-1)
	}
	if left := segPaths(t, dir); len(left) != 1 || left[0] != paths[len(paths)-1] {
		t.Fatalf("segments left %v", left)
	}
	hwmAfter, _ := os.ReadFile(hwmPath)
	hwmInfo2, _ := os.Stat(hwmPath)
	activeAfter, _ := os.ReadFile(paths[len(paths)-1])
	if string(hwmBefore) != string(hwmAfter) || !hwmInfo.ModTime().Equal(hwmInfo2.ModTime()) ||
		string(activeBefore) != string(activeAfter) {
		t.Fatal("cold retention touched the hwm file or the active segment")
	}
	if ps, _ := PeekDir(dir); !ps.Exact {
		t.Fatal("cold retention made a cleanly closed log not exact (it must not open it)")
	}
	if res, _ := ColdRetention(dir, 0, now.Add(1000*time.Hour)); res.Segments != 0 {
		t.Fatal("retention 0 deleted segments")
	}
}

func TestPeekDirReadsListingAndHWMFileOnly(t *testing.T) {
	dir := t.TempDir()
	if ps, err := PeekDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatalf("PeekDir of a missing dir: %+v", ps)
	}
	l := fillSegments(t, dir, 3)
	open := l.Stats()
	closeT(t, l)
	ps, err := PeekDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !open.Exact || !ps.Exact || ps.Segments != open.Segments || ps.SizeBytes != open.SizeBytes ||
		ps.HighWatermark != open.HighWatermark || ps.OldestOffset != open.OldestOffset ||
		!ps.OldestSegmentAt.Equal(open.OldestSegmentAt) {
		t.Fatalf("open stats %+v, closed peek %+v", open, ps)
	}
	for name, content := range map[string][]byte{
		"legacy":  {0, 0, 0, 0, 0, 0, 0, 9},
		"corrupt": {1, 2, 3},
	} {
		os.WriteFile(filepath.Join(dir, HWMFileName), content, 0o644)
		if ps, _ := PeekDir(dir); ps.Exact {
			t.Fatalf("%s hwm file reported exact", name)
		}
	}
	os.Remove(filepath.Join(dir, HWMFileName))
	if ps, _ := PeekDir(dir); ps.Exact {
		t.Fatal("missing hwm file over record bytes reported exact")
	}
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, SegmentFileName(0)), nil, 0o644)
	if ps, _ := PeekDir(empty); !ps.Exact || ps.HighWatermark != 0 {
		t.Fatalf("empty log without hwm file: %+v, want exact 0", ps)
	}
}
