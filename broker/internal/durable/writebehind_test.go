package durable

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// recordedWB records write-behind calls and fails the ones named in fail.
type recordedWB struct {
	calls []string
	fail  map[string]error
}

func (r *recordedWB) note(call string) error {
	r.calls = append(r.calls, call)
	return r.fail[call]
}

func (r *recordedWB) start(_ *os.File, off, n int64) error {
	return r.note(fmt.Sprintf("start %d+%d", off>>20, n>>20))
}

func (r *recordedWB) settle(_ *os.File, off, n int64) error {
	return r.note(fmt.Sprintf("settle %d+%d", off>>20, n>>20))
}

func (r *recordedWB) drop(_ *os.File, off, n int64) {
	_ = r.note(fmt.Sprintf("drop %d+%d", off>>20, n>>20))
}

func recordedWriteBehind(t *testing.T, window int64) (*WriteBehind, *recordedWB) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	w := NewWriteBehind(f, window)
	rec := &recordedWB{fail: map[string]error{}}
	w.sys = rec
	return w, rec
}

// Each full window is started as it completes; the one before it is then waited for and
// dropped, so at most two windows are ever in the cache; Drop takes the rest after the fsync.
func TestWriteBehindStartsEachWindowAndSettlesThePreviousOne(t *testing.T) {
	const mib = 1 << 20
	w, rec := recordedWriteBehind(t, 8*mib)
	for end := int64(mib); end <= 26*mib; end += mib {
		if err := w.Wrote(end); err != nil {
			t.Fatal(err)
		}
	}
	w.Drop()
	want := []string{
		"start 0+8",
		"start 8+8", "settle 0+8", "drop 0+8",
		"start 16+8", "settle 8+8", "drop 8+8",
		"drop 16+0", // after the caller's fsync: everything from the last settled byte on
	}
	if !slices.Equal(rec.calls, want) {
		t.Fatalf("calls:\n%v\nwant:\n%v", rec.calls, want)
	}
}

// A run of pieces that each cross a window (a 3 MiB write with a 2 MiB window) starts
// everything written so far at once.
func TestWriteBehindStartsEverythingWrittenWhenAPieceSpansWindows(t *testing.T) {
	const mib = 1 << 20
	w, rec := recordedWriteBehind(t, 2*mib)
	for _, end := range []int64{1 * mib, 4 * mib, 7 * mib} {
		if err := w.Wrote(end); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"start 0+4", "start 4+3", "settle 0+4", "drop 0+4"}
	if !slices.Equal(rec.calls, want) {
		t.Fatalf("calls %v, want %v", rec.calls, want)
	}
}

// A failed wait is a failed write (the kernel reports a write-back error once), and nothing
// is dropped or counted as settled after it.
func TestWriteBehindReturnsWriteBackErrors(t *testing.T) {
	const mib = 1 << 20
	eio := errors.New("input/output error")
	w, rec := recordedWriteBehind(t, mib)
	rec.fail["settle 0+1"] = eio
	if err := w.Wrote(mib); err != nil {
		t.Fatal(err)
	}
	if err := w.Wrote(2 * mib); !errors.Is(err, eio) {
		t.Fatalf("Wrote after a failed wait: %v, want %v", err, eio)
	}
	if slices.Contains(rec.calls, "drop 0+1") {
		t.Fatalf("dropped pages whose write-back failed: %v", rec.calls)
	}

	w, rec = recordedWriteBehind(t, mib)
	rec.fail["start 0+1"] = eio
	if err := w.Wrote(mib); !errors.Is(err, eio) {
		t.Fatalf("Wrote after a failed start: %v, want %v", err, eio)
	}
}

// On the real file system: the file holds what was written, through every start, wait and
// drop, before and after its fdatasync.
func TestWriteBehindKeepsTheFileWhole(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := NewWriteBehind(f, 256<<10)
	var want bytes.Buffer
	piece := make([]byte, 100<<10) // not a multiple of the window nor of a page
	for i := range 40 {
		for j := range piece {
			piece[j] = byte(i*7 + j)
		}
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
		want.Write(piece)
		if err := w.Wrote(int64(want.Len())); err != nil {
			t.Fatal(err)
		}
	}
	if err := Fdatasync(f); err != nil {
		t.Fatal(err)
	}
	w.Drop()
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file differs from what was written (%d bytes, want %d)", len(got), want.Len())
	}
}
