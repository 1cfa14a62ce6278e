package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"narad.dev/broker/internal/durable"
)

// The -segments mode measures the disk's side of a replica catch-up
// (docs/internals/replication.md §5, segment pre-copy): writers, one per partition, each
// write segments of 64 MiB in 1 MiB direct writes, and each segment is installed as a
// follower installs a copied one (fdatasync, rename, a new empty file, directory fsync),
// or not synced at all; once more through the page cache, installed the same way; and through
// the page cache with write-behind (durable.WriteBehind), installed the same way: how a
// follower writes a copied segment (docs/internals/storage-format.md §21). A single file
// written through the page cache and fdatasynced once (what `dd conv=fdatasync` measures) runs
// in the same process for the ratio.

const (
	segBytes   = 64 << 20
	chunkBytes = 1 << 20
)

// segmentRun is one layout's result.
type segmentRun struct {
	bytes   int64
	elapsed time.Duration
	syncs   []time.Duration // each install's fdatasync + rename + create + directory fsync
}

func (r segmentRun) String() string {
	mb := float64(r.bytes) / 1e6
	s := fmt.Sprintf("%.0f MB in %v: %.0f MB/s", mb, r.elapsed.Round(time.Millisecond), mb/r.elapsed.Seconds())
	if len(r.syncs) > 0 {
		var sum, top time.Duration
		for _, d := range r.syncs {
			sum += d
			top = max(top, d)
		}
		s += fmt.Sprintf("; %d installs, %v each on average, longest %v", len(r.syncs),
			(sum / time.Duration(len(r.syncs))).Round(100*time.Microsecond), top.Round(100*time.Microsecond))
	}
	return s
}

// segmentLayout is how the segments of one run are written.
type segmentLayout struct {
	name                    string
	install, direct, behind bool
}

// segmentsCompare prints the rate of writers × segs segments installed one by one, the same
// without any sync, the same installed but written through the page cache, without and with
// write-behind, and one page-cache file of the same size with one fdatasync.
func segmentsCompare(dir string, writers, segs int) error {
	for _, l := range []segmentLayout{
		{name: "installed", install: true, direct: true}, {name: "unsynced", direct: true},
		{name: "buffered", install: true}, {name: "behind", install: true, behind: true},
	} {
		r, err := writeSegments(dir, writers, segs, l)
		if err != nil {
			return err
		}
		how := "direct writes"
		switch {
		case l.behind:
			how = "page-cache writes with write-behind"
		case !l.direct:
			how = "page-cache writes"
		}
		fmt.Printf("%-10s %d × %d segments of 64 MiB, %s: %s\n", l.name, writers, segs, how, r)
	}
	r, err := writeBuffered(dir, int64(writers*segs)*segBytes)
	if err != nil {
		return err
	}
	fmt.Printf("%-10s one file through the page cache, one fdatasync: %s\n", "dd-like", r)
	return nil
}

// writeSegments runs the writers at once, each in a directory of its own.
func writeSegments(dir string, writers, segs int, l segmentLayout) (segmentRun, error) {
	root, err := os.MkdirTemp(dir, "fsyncbench-segments-*")
	if err != nil {
		return segmentRun{}, err
	}
	defer os.RemoveAll(root)
	var (
		mu   sync.Mutex
		run  segmentRun
		errs = make([]error, writers)
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := range writers {
		d := filepath.Join(root, fmt.Sprint(w))
		if err := os.Mkdir(d, 0o755); err != nil {
			return segmentRun{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := durable.AlignedBuffer(chunkBytes)
			for i := range buf {
				buf[i] = byte(i * (w + 1))
			}
			for s := range segs {
				took, err := writeSegment(d, s, buf, l)
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				run.bytes += segBytes
				if l.install {
					run.syncs = append(run.syncs, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	for _, err := range errs {
		if err != nil {
			return segmentRun{}, err
		}
	}
	return run, nil
}

// writeSegment writes segment s of directory d under a temp name and renames it into place;
// with l.install it also makes it durable as an installed copy is. It returns the install's
// time.
func writeSegment(d string, s int, buf []byte, l segmentLayout) (time.Duration, error) {
	tmp := filepath.Join(d, fmt.Sprintf("%020d.seg.tmp", s))
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if l.direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(tmp, flags, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	wb := durable.NewWriteBehind(f, 0)
	for off := int64(0); off < segBytes; off += chunkBytes {
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, err
		}
		if l.behind {
			if err := wb.Wrote(off + chunkBytes); err != nil {
				return 0, err
			}
		}
	}
	t := time.Now()
	if l.install {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
	}
	if l.behind {
		wb.Drop()
	}
	if err := os.Rename(tmp, filepath.Join(d, fmt.Sprintf("%020d.seg", s))); err != nil {
		return 0, err
	}
	if !l.install {
		return 0, nil
	}
	next, err := os.Create(filepath.Join(d, fmt.Sprintf("%020d.seg", s+1)))
	if err != nil {
		return 0, err
	}
	next.Close()
	if err := durable.SyncDir(d); err != nil {
		return 0, err
	}
	return time.Since(t), nil
}

// writeBuffered writes n bytes to one file through the page cache, then fdatasyncs it.
func writeBuffered(dir string, n int64) (segmentRun, error) {
	f, err := os.CreateTemp(dir, "fsyncbench-dd-*")
	if err != nil {
		return segmentRun{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, chunkBytes)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for off := int64(0); off < n; off += chunkBytes {
		if _, err := f.WriteAt(buf, off); err != nil {
			return segmentRun{}, err
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return segmentRun{}, err
	}
	return segmentRun{bytes: n, elapsed: time.Since(start)}, nil
}
