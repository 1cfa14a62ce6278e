package cursorfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// Re-read policy for a record failing its check (docs/internals/storage-format.md §13: the first read plus up
// to 3 more, 10 ms apart). A reader can catch the owner's in-place write half done; the CRC
// turns that into a retry instead of a fabricated position.
const (
	readTries    = 4
	readInterval = 10 * time.Millisecond
)

// reader is the re-read loop; tests shorten it or observe its attempts.
type reader struct {
	tries    int
	interval time.Duration
	// onRetry, if set, runs after failed attempt n (1-based) before the next one.
	onRetry func(n int, err error)
}

var defaultReader = reader{tries: readTries, interval: readInterval}

// Read returns the state recorded in the cursor file at path. It never creates or changes the
// file. A missing file is ErrNotExist; a file failing its check on every re-read is ErrCorrupt.
// Safe to call while the cursor's Writer advances the same file.
func Read(ctx context.Context, path string) (State, error) {
	st, _, err := defaultReader.read(ctx, path, func() ([]byte, error) { return readPath(path) })
	return st, err
}

// read runs load until its bytes parse, up to r.tries times. Only a failed check is retried:
// a missing file or an I/O error is returned at once.
func (r reader) read(ctx context.Context, path string, load func() ([]byte, error)) (State, bool, error) {
	var lastErr error
	for n := 1; ; n++ {
		b, err := load()
		if errors.Is(err, fs.ErrNotExist) {
			return State{}, false, fmt.Errorf("cursorfile: %s: %w", path, ErrNotExist)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return State{}, false, fmt.Errorf("cursorfile: read %s: %w", path, err)
		}
		if err == nil {
			st, fixed, perr := parse(b)
			if perr == nil {
				return st, fixed, nil
			}
			err = perr
		}
		lastErr = err
		if n >= r.tries {
			break
		}
		if r.onRetry != nil {
			r.onRetry(n, err)
		}
		t := time.NewTimer(r.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return State{}, false, fmt.Errorf("cursorfile: read %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
	return State{}, false, fmt.Errorf("cursorfile: %s after %d reads: %w", path, r.tries, lastErr)
}

// readPath reads the whole file at path, opening it afresh so that a re-read also sees a
// replacement made by rename.
func readPath(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readFile(f)
}

// readFile reads f from offset 0; more than maxFileSize bytes is corrupt.
func readFile(f *os.File) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, maxFileSize+1), maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, corruptf("larger than %d bytes", maxFileSize)
	}
	return b, nil
}
