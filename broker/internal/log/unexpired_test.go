package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestUnexpiredRecordsJudgesByRetentionAndMtimeWithoutTouchingTheDir: a closed copy holds
// unexpired records when a non-empty segment's mtime is within retention (any non-empty
// segment under retention 0); empty segments and expired ones hold none; the directory is
// read, never recovered or written.
func TestUnexpiredRecordsJudgesByRetentionAndMtimeWithoutTouchingTheDir(t *testing.T) {
	now := time.Now()
	hour := int64(time.Hour / time.Millisecond)
	build := func(t *testing.T, records int, segAges ...time.Duration) string {
		t.Helper()
		dir := t.TempDir()
		l := openT(t, dir, Options{SegmentBytes: 200})
		for i := 0; i < records; i++ {
			if _, err := l.Commit(testEntries("r", 1, 250), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		segs, err := listSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range segs {
			if i < len(segAges) {
				mt := now.Add(-segAges[i])
				if err := os.Chtimes(s.path, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dir
	}
	cases := []struct {
		name        string
		records     int
		ages        []time.Duration
		retentionMs int64
		wantAny     bool
		wantRecords int64
	}{
		{"empty log holds none", 0, nil, 0, false, 0},
		{"retention zero keeps every record", 4, []time.Duration{100 * time.Hour, 100 * time.Hour, 100 * time.Hour, 100 * time.Hour, 100 * time.Hour}, 0, true, 4},
		{"all segments older than retention hold none", 4, []time.Duration{3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 3 * time.Hour}, hour, false, 0},
		{"fresh newest segment holds records", 4, []time.Duration{3 * time.Hour, 3 * time.Hour, 3 * time.Hour, time.Minute, time.Minute}, hour, true, 1},
		{"fresh segments within retention", 3, nil, hour, true, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := build(t, tc.records, tc.ages...)
			before, err := os.ReadFile(filepath.Join(dir, HWMFileName))
			if err != nil {
				t.Fatal(err)
			}
			u, err := UnexpiredRecords(dir, tc.retentionMs, now)
			if err != nil {
				t.Fatal(err)
			}
			if u.Any() != tc.wantAny || u.Records() != tc.wantRecords {
				t.Fatalf("got %+v (records %d), want any=%v records=%d", u, u.Records(), tc.wantAny, tc.wantRecords)
			}
			after, err := os.ReadFile(filepath.Join(dir, HWMFileName))
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("hwm file changed: %x → %x (%v)", before, after, err)
			}
		})
	}
}

// TestUnexpiredRecordsStopsAtADamagedTail: a torn last frame is not counted and is not
// truncated (no recovery).
func TestUnexpiredRecordsStopsAtADamagedTail(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	for i := 0; i < 3; i++ {
		if _, err := l.Commit(testEntries("r", 2, 50), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, SegmentFileName(0))
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()-5); err != nil {
		t.Fatal(err)
	}
	u, err := UnexpiredRecords(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if u.EndOffset != 4 || !u.Any() {
		t.Fatalf("got %+v, want end 4 (the torn third frame not counted)", u)
	}
	if fi2, _ := os.Stat(seg); fi2.Size() != fi.Size()-5 {
		t.Fatalf("segment was modified: size %d", fi2.Size())
	}
}

// FuzzWalkEnd: the header walk over arbitrary bytes never fails on damage, never reads past
// the size, and never reports an end below -1.
func FuzzWalkEnd(f *testing.F) {
	one, _ := buildFrames(f, CodecNone, 0, testEntries("a", 2, 10), 1, maxInnerBytes)
	two, _ := buildFrames(f, CodecZstd, 2, testEntries("b", 2, 10), 2, maxInnerBytes)
	good := append(append([]byte(nil), one...), two...)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{0xCA, 0xFE, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		end, err := walkEnd(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("walkEnd: %v", err)
		}
		if end < -1 {
			t.Fatalf("end %d", end)
		}
		if len(b) == 0 && end != -1 {
			t.Fatalf("empty input ended at %d", end)
		}
	})
}
