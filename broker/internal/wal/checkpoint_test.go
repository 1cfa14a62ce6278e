package wal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestAdvanceOnlyMovesForwardAndNotPastNextSeq(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	appendN(t, w, 0, 10)
	if err := w.Advance(4); err != nil {
		t.Fatalf("Advance(4): %v", err)
	}
	cases := []struct {
		name string
		cp   uint64
		want error
	}{
		{"backwards", 3, ErrCheckpoint},
		{"past next seq", 11, ErrCheckpoint},
		{"same", 4, nil},
		{"to next seq", 10, nil},
	}
	for _, tc := range cases {
		if err := w.Advance(tc.cp); !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Fatalf("%s: Advance(%d) = %v, want %v", tc.name, tc.cp, err, tc.want)
		}
	}
	if w.Checkpoint() != 10 {
		t.Fatalf("Checkpoint = %d, want 10", w.Checkpoint())
	}
}

func TestCheckpointPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{})
	appendN(t, w, 0, 10)
	if err := w.Advance(7); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if cp, derr := decodeCheckpoint(b); err != nil || derr != nil || cp != 7 {
		t.Fatalf("checkpoint file = %x (%v, %v), want 7", b, err, derr)
	}
	w2 := openT(t, dir, Options{})
	if w2.Checkpoint() != 7 || w2.NextSeq() != 10 {
		t.Fatalf("after reopen checkpoint %d next %d, want 7 and 10", w2.Checkpoint(), w2.NextSeq())
	}
	if _, err := w2.ReadFrom(6, 1); !errors.Is(err, ErrBelowCheckpoint) {
		t.Fatalf("ReadFrom below checkpoint = %v, want ErrBelowCheckpoint", err)
	}
	es, err := w2.ReadFrom(7, 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("ReadFrom(7): %d, %v", len(es), err)
	}
	checkEntries(t, es, 7, func(seq uint64) int { return int(seq) })
}

func TestCompactionDeletesOnlySegmentsWhollyBelowCheckpoint(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentBytes: 200})
	for i := range 20 {
		appendN(t, w, i, 1)
	}
	before := len(segmentPaths(t, dir))
	w.mu.Lock()
	var cut uint64 // a checkpoint inside the third segment
	if len(w.segs) < 4 {
		t.Fatalf("want ≥ 4 segments, have %d", len(w.segs))
	}
	cut = w.segs[2].base + 1
	w.mu.Unlock()
	if err := w.Advance(cut); err != nil {
		t.Fatal(err)
	}
	after := segmentPaths(t, dir)
	if len(after) != before-2 || filepath.Base(after[0]) != segmentName(cut-1) {
		t.Fatalf("after Advance(%d): %d of %d segments left, first %s", cut, len(after), before, filepath.Base(after[0]))
	}
	es, err := w.ReadFrom(cut, 100)
	if err != nil || len(es) != 20-int(cut) {
		t.Fatalf("ReadFrom(%d): %d, %v", cut, len(es), err)
	}
}

func TestFinishedActiveSegmentOfOneMiBIsRolledAndDeleted(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{})
	big := testRecord(0)
	big.Payload = make([]byte, 64<<10)
	for range 17 { // > 1 MiB in the active segment
		if _, err := w.Append(t.Context(), big); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Advance(w.NextSeq()); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentPaths(t, dir)); n != 0 {
		t.Fatalf("%d segments left after finishing a 1 MiB active segment, want 0", n)
	}
	// The next batch opens a new segment named by its seq; a reopen keeps the seqs dense.
	seq := appendN(t, w, 17, 1)
	if seq != 17 || filepath.Base(segmentPaths(t, dir)[0]) != segmentName(17) {
		t.Fatalf("seq %d in %v", seq, segmentPaths(t, dir))
	}
	w.Close()
	w2 := openT(t, dir, Options{})
	if w2.NextSeq() != 18 || w2.Checkpoint() != 17 {
		t.Fatalf("reopen: next %d checkpoint %d", w2.NextSeq(), w2.Checkpoint())
	}
}

func TestSmallFinishedActiveSegmentIsKept(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{})
	appendN(t, w, 0, 3)
	if err := w.Advance(3); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentPaths(t, dir)); n != 1 {
		t.Fatalf("%d segments, want the small active one kept", n)
	}
	if got := appendN(t, w, 3, 1); got != 3 {
		t.Fatalf("seq %d, want 3", got)
	}
}

func TestReopenWithEverySegmentCompactedKeepsNextSeq(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentBytes: 200})
	for i := range 10 {
		appendN(t, w, i, 1)
	}
	if err := w.Advance(10); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, p := range segmentPaths(t, dir) { // as if the small active segment had been rolled too
		os.Remove(p)
	}
	w2 := openT(t, dir, Options{})
	if w2.NextSeq() != 10 {
		t.Fatalf("NextSeq = %d, want 10", w2.NextSeq())
	}
	if got := appendN(t, w2, 10, 1); got != 10 {
		t.Fatalf("seq %d, want 10", got)
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(encodeCheckpoint(0))
	f.Add(encodeCheckpoint(1 << 63))
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := decodeCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) || len(b) == checkpointSize {
				t.Fatalf("decodeCheckpoint(%x) = %v", b, err)
			}
			return
		}
		if string(encodeCheckpoint(cp)) != string(b) {
			t.Fatalf("round trip %x → %d", b, cp)
		}
	})
}
