package cursorfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestCorruptFileIsErrCorruptOnlyAfterEveryReread(t *testing.T) {
	path := tempCursor(t)
	bad := mustEncode(t, testEpoch, 98332)
	bad[100] = 'X' // padding byte: CRC mismatch
	writeRaw(t, path, bad)
	var attempts []int
	r := reader{tries: readTries, interval: time.Millisecond, onRetry: func(n int, err error) {
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("retry %d after %v, want a corrupt read", n, err)
		}
		attempts = append(attempts, n)
	}}
	_, _, err := r.read(context.Background(), path, func() ([]byte, error) { return readPath(path) })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read corrupt: %v, want ErrCorrupt", err)
	}
	if len(attempts) != readTries-1 {
		t.Fatalf("re-read %d times before giving up, want %d", len(attempts), readTries-1)
	}
	// The public entry points use the same policy.
	if _, err := Read(context.Background(), path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read corrupt: %v", err)
	}
	if _, _, err := Open(context.Background(), filepath.Dir(path), testChild); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open corrupt: %v", err)
	}
	writeRaw(t, path, make([]byte, maxFileSize+1))
	if _, err := Read(context.Background(), path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read oversized: %v", err)
	}
}

// A reader that caught a half-done write succeeds once the write is whole.
func TestRereadReturnsTheRecordOnceTheWriteIsWhole(t *testing.T) {
	path := tempCursor(t)
	good := mustEncode(t, testEpoch, 200)
	// Caught mid-write: the new record's first half over the old record's second half.
	torn := append(append([]byte{}, good[:40]...), mustEncode(t, testEpoch, 100)[40:]...)
	writeRaw(t, path, torn)
	r := reader{tries: readTries, interval: time.Millisecond, onRetry: func(n int, err error) {
		if n == 1 {
			writeRaw(t, path, good)
		}
	}}
	st, _, err := r.read(context.Background(), path, func() ([]byte, error) { return readPath(path) })
	if err != nil || st.NextOffset != 200 {
		t.Fatalf("re-read gave %+v, %v; want offset 200", st, err)
	}
}

func TestReadOfACorruptFileStopsWhenTheContextEnds(t *testing.T) {
	path := tempCursor(t)
	writeRaw(t, path, []byte("garbage"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a cancelled context: %v, want context.Canceled", err)
	}
}

// docs/internals/storage-format.md §13: a reader looping while the writer advances never returns an
// offset that was not written as a whole record, and never sees the position go backwards.
func TestConcurrentReaderNeverSeesAnOffsetNotWrittenWhole(t *testing.T) {
	path := tempCursor(t)
	w := mustAnchor(t, path, testEpoch, 0)
	// Offsets whose records differ in many bytes: a mix of two would be a third valid-looking
	// number without the CRC.
	const n = 400
	offsets := make([]int64, n)
	written := map[int64]bool{0: true}
	for i := range offsets {
		offsets[i] = int64(i+1) * 1_111_111_111
		written[offsets[i]] = true
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads int
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := int64(0)
		for {
			st, err := Read(context.Background(), path)
			if err != nil {
				t.Errorf("concurrent Read: %v", err)
				return
			}
			reads++
			if !written[st.NextOffset] || st.Epoch != testEpoch {
				t.Errorf("read %+v, which was never written", st)
				return
			}
			if st.NextOffset < last {
				t.Errorf("read went backwards: %d after %d", st.NextOffset, last)
				return
			}
			last = st.NextOffset
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for _, o := range offsets {
		if err := w.Advance(o); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if reads == 0 {
		t.Fatal("the reader never ran")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
