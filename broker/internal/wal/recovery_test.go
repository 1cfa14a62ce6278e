package wal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRecords creates a WAL in dir holding n records (one batch each) and closes it.
func writeRecords(t *testing.T, dir string, n int, opts Options) {
	t.Helper()
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		appendN(t, w, i, 1)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func segmentPaths(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func frameSize(i int) int64 { return int64(frameLen(EncodedLen(testRecord(i)))) }

// PC-4: a frame cut in half at EOF is a torn tail: open truncates it and continues the seqs.
func TestTornTailIsTruncatedAtOpen(t *testing.T) {
	cases := []struct {
		name string
		tear func(t *testing.T, path string, size int64)
	}{
		{"half a frame", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-frameSize(4)/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"header fragment", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-frameSize(4)+7); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage appended", func(t *testing.T, path string, size int64) {
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte("NWAL\x00\x00\x00\x05junkjunk"))
			f.Close()
		}},
		{"zeroed tail", func(t *testing.T, path string, size int64) {
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt(make([]byte, 9), size-9)
			f.Close()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRecords(t, dir, 5, Options{})
			seg := segmentPaths(t, dir)[0]
			fi, _ := os.Stat(seg)
			tc.tear(t, seg, fi.Size())
			w := openT(t, dir, Options{})
			want := uint64(4)
			if tc.name == "garbage appended" {
				want = 5
			}
			if got := w.NextSeq(); got != want {
				t.Fatalf("NextSeq after torn tail = %d, want %d", got, want)
			}
			seq := appendN(t, w, int(want), 1)
			if seq != want {
				t.Fatalf("append after recovery got seq %d, want %d", seq, want)
			}
			es, err := w.ReadFrom(0, 100)
			if err != nil || len(es) != int(want)+1 {
				t.Fatalf("ReadFrom: %d entries, %v", len(es), err)
			}
			checkEntries(t, es, 0, func(seq uint64) int { return int(seq) })
		})
	}
}

// PC-4: damage followed by a valid frame, or in an earlier segment, fails the open naming the
// segment.
func TestMidFileDamageFailsOpenNamingTheSegment(t *testing.T) {
	cases := []struct {
		name  string
		segs  int64 // SegmentBytes, 0 = one segment
		which func(paths []string) string
		at    func(size int64) int64
	}{
		{"payload bit flip mid-file", 0, func(p []string) string { return p[0] },
			func(int64) int64 { return frameSize(0) + frameHeaderSize + 3 }},
		{"magic damaged mid-file", 0, func(p []string) string { return p[0] },
			func(int64) int64 { return frameSize(0) + frameSize(1) }},
		{"last frame of an earlier segment", 200, func(p []string) string { return p[0] },
			func(size int64) int64 { return size - 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRecords(t, dir, 5, Options{SegmentBytes: tc.segs})
			paths := segmentPaths(t, dir)
			victim := tc.which(paths)
			fi, _ := os.Stat(victim)
			f, _ := os.OpenFile(victim, os.O_RDWR, 0)
			b := make([]byte, 1)
			off := tc.at(fi.Size())
			f.ReadAt(b, off)
			b[0] ^= 0xFF
			f.WriteAt(b, off)
			f.Close()
			_, err := Open(dir, Options{SegmentBytes: tc.segs})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(victim)) {
				t.Fatalf("Open = %v, want ErrDamaged naming %s", err, filepath.Base(victim))
			}
		})
	}
}

// The seq is not CRC-covered: a complete frame with a wrong seq is damage, even as the last frame
// (a torn write never yields a complete, CRC-valid frame).
func TestWrongSeqInACompleteFrameIsDamage(t *testing.T) {
	for _, frame := range []int{1, 2} {
		dir := t.TempDir()
		writeRecords(t, dir, 3, Options{})
		seg := segmentPaths(t, dir)[0]
		f, _ := os.OpenFile(seg, os.O_RDWR, 0)
		var off int64
		for i := range frame {
			off += frameSize(i)
		}
		f.WriteAt([]byte{9}, off+15) // low byte of the frame's seq
		f.Close()
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
			t.Fatalf("frame %d of 3: Open = %v, want ErrDamaged", frame, err)
		}
	}
}

func TestMissingSegmentsFailOpen(t *testing.T) {
	t.Run("gap between segments", func(t *testing.T) {
		dir := t.TempDir()
		writeRecords(t, dir, 10, Options{SegmentBytes: 200})
		paths := segmentPaths(t, dir)
		if len(paths) < 3 {
			t.Fatalf("want ≥ 3 segments, have %d", len(paths))
		}
		os.Remove(paths[1])
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open = %v, want ErrDamaged", err)
		}
	})
	t.Run("checkpoint past next seq", func(t *testing.T) {
		dir := t.TempDir()
		writeRecords(t, dir, 3, Options{})
		os.WriteFile(filepath.Join(dir, checkpointName), encodeCheckpoint(10), 0o644)
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open = %v, want ErrDamaged", err)
		}
	})
	t.Run("first segment above checkpoint", func(t *testing.T) {
		dir := t.TempDir()
		writeRecords(t, dir, 10, Options{SegmentBytes: 200})
		os.Remove(segmentPaths(t, dir)[0])
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open = %v, want ErrDamaged", err)
		}
	})
	t.Run("corrupt checkpoint file and no segment", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, checkpointName), []byte{1, 2, 3}, 0o644)
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("Open = %v, want ErrDamaged for the corrupt checkpoint", err)
		}
	})
}

// A checkpoint that does not decode (a torn in-place write) is replaced by the first
// segment's base: the open succeeds and the finished records in between are read again.
func TestAnUnreadableCheckpointFallsBackToTheFirstSegment(t *testing.T) {
	for name, content := range map[string][]byte{
		"crc mismatch": func() []byte { b := encodeCheckpoint(9); b[3] ^= 1; return b }(),
		"odd size":     {1, 2, 3},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := openT(t, dir, Options{SegmentBytes: 200})
			for i := range 12 {
				appendN(t, w, i, 1) // one batch each: several segments
			}
			if err := w.Advance(9); err != nil {
				t.Fatal(err)
			}
			w.Close()
			first := segmentBase(t, segmentPaths(t, dir)[0])
			if first == 0 || first > 9 {
				t.Fatalf("first segment base %d after compaction, want in (0, 9]", first)
			}
			if err := os.WriteFile(filepath.Join(dir, checkpointName), content, 0o644); err != nil {
				t.Fatal(err)
			}
			w2 := openT(t, dir, Options{SegmentBytes: 200})
			if w2.Checkpoint() != first || w2.NextSeq() != 12 {
				t.Fatalf("after reopen checkpoint %d next %d, want %d and 12", w2.Checkpoint(), w2.NextSeq(), first)
			}
			es, err := w2.ReadFrom(first, 100)
			if err != nil || len(es) != int(12-first) {
				t.Fatalf("ReadFrom(%d): %d, %v", first, len(es), err)
			}
		})
	}
}

// segmentBase is the base seq in a segment file's name.
func segmentBase(t *testing.T, path string) uint64 {
	t.Helper()
	base, ok := parseSegmentName(filepath.Base(path))
	if !ok {
		t.Fatalf("%s is not a segment name", path)
	}
	return base
}

func TestReopenContinuesSeqsAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 10, Options{SegmentBytes: 200})
	w := openT(t, dir, Options{SegmentBytes: 200})
	if got := appendN(t, w, 10, 2); got != 10 {
		t.Fatalf("first seq after reopen = %d, want 10", got)
	}
	es, err := w.ReadFrom(0, 100)
	if err != nil || len(es) != 12 {
		t.Fatalf("ReadFrom: %d, %v", len(es), err)
	}
	checkEntries(t, es, 0, func(seq uint64) int { return int(seq) })
}
