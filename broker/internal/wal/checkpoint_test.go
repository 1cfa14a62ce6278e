package wal

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// The checkpoint file is overwritten in place (the same file, no rename), and a legacy
// 8-byte file is read and then rewritten in the current format.
func TestCheckpointIsWrittenInPlaceAndReadsTheLegacyFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, checkpointName)
	w := openT(t, dir, Options{})
	appendN(t, w, 0, 10)
	if err := w.Advance(3); err != nil {
		t.Fatal(err)
	}
	before := inode(t, path)
	if err := w.Advance(5); err != nil {
		t.Fatal(err)
	}
	if after := inode(t, path); after != before {
		t.Fatalf("checkpoint file replaced (inode %d → %d), want it overwritten in place", before, after)
	}
	w.Close()

	legacy := binary.BigEndian.AppendUint64(nil, 6)
	if err := os.WriteFile(path, legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	w2 := openT(t, dir, Options{})
	if w2.Checkpoint() != 6 {
		t.Fatalf("legacy checkpoint read as %d, want 6", w2.Checkpoint())
	}
	if err := w2.Advance(8); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if cp, derr := decodeCheckpoint(b); err != nil || derr != nil || cp != 8 || len(b) != checkpointSize {
		t.Fatalf("checkpoint file after an advance = %x (%v, %v), want the 16-byte record of 8", b, err, derr)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(encodeCheckpoint(0))
	f.Add(encodeCheckpoint(1 << 63))
	f.Add(binary.BigEndian.AppendUint64(nil, 42))
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := decodeCheckpoint(b)
		switch {
		case err != nil:
			if !errors.Is(err, ErrCorruptCheckpoint) || len(b) == 0 || len(b) == checkpointLegacySize {
				t.Fatalf("decodeCheckpoint(%x) = %v", b, err)
			}
		case len(b) == 0:
			if cp != 0 {
				t.Fatalf("empty file read as %d", cp)
			}
		case len(b) == checkpointLegacySize:
			if cp != binary.BigEndian.Uint64(b) {
				t.Fatalf("legacy %x read as %d", b, cp)
			}
		case string(encodeCheckpoint(cp)) != string(b):
			t.Fatalf("round trip %x → %d", b, cp)
		}
	})
}

// Close while Advance writes the checkpoint and compacts: neither waits for the other
// forever, and an Advance after Close is refused.
func TestCloseDuringAdvance(t *testing.T) {
	for range 20 {
		dir := t.TempDir()
		w, err := Open(dir, Options{SegmentBytes: 200})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			appendN(t, w, i, 1)
		}
		done := make(chan error, 1)
		go func() {
			var err error
			for cp := uint64(1); cp <= 20 && err == nil; cp++ {
				err = w.Advance(cp)
			}
			done <- err
		}()
		if err := w.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("Advance around Close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Advance did not return after Close")
		}
	}
}
