package wal

import (
	"testing"
)

// ReadFrom must be correct at every seq ≥ Checkpoint(), whether served from the tail or disk.
func TestReadFromIsCorrectFromTailDiskAndMixed(t *testing.T) {
	cases := []struct {
		name string
		opts Options
	}{
		{"tail", Options{}},
		{"disk only", Options{TailBytes: -1, SegmentBytes: 600}},
		{"tail bound exceeded", Options{TailBytes: 3000, SegmentBytes: 600}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := openT(t, t.TempDir(), tc.opts)
			n := 0
			for i := range 40 {
				appendN(t, w, n, i%4+1)
				n += i%4 + 1
			}
			for from := uint64(0); from < uint64(n); from += 7 {
				for _, max := range []int{1, 5, 1000} {
					es, err := w.ReadFrom(from, max)
					if err != nil {
						t.Fatalf("ReadFrom(%d, %d): %v", from, max, err)
					}
					if want := min(max, n-int(from)); len(es) != want {
						t.Fatalf("ReadFrom(%d, %d) returned %d, want %d", from, max, len(es), want)
					}
					checkEntries(t, es, from, func(seq uint64) int { return int(seq) })
				}
			}
			if es, err := w.ReadFrom(uint64(n), 10); err != nil || len(es) != 0 {
				t.Fatalf("ReadFrom(next) = %d, %v; want empty", len(es), err)
			}
		})
	}
}

func TestTailIsBoundedAndRefillsAfterCheckpointDrainsIt(t *testing.T) {
	w := openT(t, t.TempDir(), Options{TailBytes: 4000})
	for i := range 60 {
		appendN(t, w, i, 1)
	}
	if tb := w.Stats().TailBytes; tb > 4000 || tb == 0 {
		t.Fatalf("tail holds %d bytes, want (0, 4000]", tb)
	}
	if err := w.Advance(60); err != nil {
		t.Fatal(err)
	}
	if tb := w.Stats().TailBytes; tb != 0 {
		t.Fatalf("tail holds %d bytes after the checkpoint passed everything", tb)
	}
	appendN(t, w, 60, 1)
	w.mu.Lock()
	lo, hi := w.tail.bounds()
	w.mu.Unlock()
	if lo != 60 || hi != 61 {
		t.Fatalf("tail = [%d, %d), want [60, 61) once drained", lo, hi)
	}
}

func TestReadFromAfterRestartReadsDisk(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, 30, Options{SegmentBytes: 500})
	w := openT(t, dir, Options{SegmentBytes: 500})
	appendN(t, w, 30, 5) // these come from the tail, the first 30 from disk
	es, err := w.ReadFrom(3, 100)
	if err != nil || len(es) != 32 {
		t.Fatalf("ReadFrom(3): %d, %v", len(es), err)
	}
	checkEntries(t, es, 3, func(seq uint64) int { return int(seq) })
}

func TestTailEntriesDoNotAliasCallerPayload(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	r := testRecord(1)
	if _, err := w.Append(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	r.Payload[0] = 'X' // the caller reuses its buffer after Append returns
	es, err := w.ReadFrom(0, 1)
	if err != nil || !sameRecord(es[0].Record, testRecord(1)) {
		t.Fatalf("tail entry changed with the caller's buffer: %+v, %v", es, err)
	}
}
