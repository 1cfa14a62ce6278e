package durable

import (
	"fmt"
	"os"
)

// Write-behind (docs/internals/storage-format.md §21). A file written once, front to back, in
// large pieces (a copied segment) goes through the page cache, and WriteBehind keeps the disk
// busy with it while the writer goes on: every WriteBehindWindow bytes it starts the write-back
// of the window just written, waits for the one before it to reach the disk, and drops that
// one's pages from the cache. The disk then gets deep queues of large writes the kernel merged
// (direct 1 MiB writes keep one in flight per writer), the cache holds at most two windows of
// the file, and the writer never waits behind the kernel's dirty-page throttling. None of this
// makes anything durable: the caller's fdatasync at the end does, and it finds most of the file
// already written.
//
// A write-back error seen by a wait is returned by Wrote: once reported, the kernel does not
// report it again to a later fdatasync of the same descriptor, so the caller must take Wrote's
// error as a failed write.

// WriteBehindWindow is the default window: large enough that the disk sees merged writes of
// several MiB, small enough that a copy holds little of the cache.
const WriteBehindWindow = 8 << 20

// WriteBehind is the write-behind state of one file; its methods are for one goroutine.
type WriteBehind struct {
	f       *os.File
	window  int64
	started int64 // bytes [0, started) have had their write-back started
	settled int64 // bytes [0, settled) were waited for and dropped from the cache
	sys     wbSys
}

// wbSys is the kernel's side of write-behind: platformWB on Linux (sync_file_range,
// posix_fadvise); a no-op elsewhere. Tests record the calls.
type wbSys interface {
	start(f *os.File, off, n int64) error  // start write-back of [off, off+n), do not wait
	settle(f *os.File, off, n int64) error // wait until [off, off+n) is written back
	drop(f *os.File, off, n int64)         // drop clean cached pages of [off, off+n); n = 0: to the end
}

// NewWriteBehind returns the write-behind of f (written from offset 0 on) with window bytes per
// step; window ≤ 0 means WriteBehindWindow.
func NewWriteBehind(f *os.File, window int64) *WriteBehind {
	if window <= 0 {
		window = WriteBehindWindow
	}
	return &WriteBehind{f: f, window: window, sys: platformWB{}}
}

// Wrote tells that the file now holds the bytes [0, end), written through the page cache.
// Once a window of them is not yet started it starts them, and settles (waits for and drops)
// everything started before. An error is a write-back failure: the bytes may not be on disk.
func (w *WriteBehind) Wrote(end int64) error {
	if end-w.started < w.window {
		return nil
	}
	if err := w.sys.start(w.f, w.started, end-w.started); err != nil {
		return fmt.Errorf("write-behind of %s: %w", w.f.Name(), err)
	}
	if w.started > w.settled {
		if err := w.sys.settle(w.f, w.settled, w.started-w.settled); err != nil {
			return fmt.Errorf("write-behind of %s: %w", w.f.Name(), err)
		}
		w.sys.drop(w.f, w.settled, w.started-w.settled)
		w.settled = w.started
	}
	w.started = end
	return nil
}

// Drop drops the file's cached pages from where Wrote left off: call it after the fdatasync
// that made the file durable (pages still dirty stay cached; dropping is advice).
func (w *WriteBehind) Drop() {
	w.sys.drop(w.f, w.settled, 0)
	w.settled = w.started
}

// DropCached drops f's clean cached pages (advice: pages still dirty stay cached).
func DropCached(f *os.File) { platformWB{}.drop(f, 0, 0) }
