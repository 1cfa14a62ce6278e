// Command fsyncbench measures the disk's own fsync rate (4 KiB write + fdatasync) for
// reference next to the broker benchmarks.
//
// With -compare it measures instead what an fdatasync costs a log that appends 1 KiB records,
// in three file layouts: appending (every sync also records the file's new size, as a
// partition segment or the ingress WAL does), writing into blocks fallocate reserved
// (the size still moves, and each block changes from reserved to written), and overwriting
// blocks written beforehand (only the data is flushed). For each it prints the rate, the p50
// and the process's CPU time (user + system) per write + fdatasync: on a virtual machine the
// flush is largely CPU spent in the guest's kernel, which the broker's CPU per message pays.
//
// With -segments it measures the disk's side of a replica catch-up instead (segments.go).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the filesystem to measure")
	n := flag.Int("n", 2000, "number of write+fdatasync rounds")
	compare := flag.Bool("compare", false, "compare appending, fallocated and pre-written 1 KiB records (rate and CPU per fdatasync)")
	segments := flag.Int("segments", 0, "with N > 0: write N segments of 64 MiB per writer, installed one by one as a catch-up installs them, against unsynced and page-cache writes")
	writers := flag.Int("writers", 3, "with -segments: writers (partitions) at once")
	flag.Parse()
	if *segments > 0 {
		if err := segmentsCompare(*dir, *writers, *segments); err != nil {
			fail(err)
		}
		return
	}
	if !*compare {
		rate, p50, p99, _, err := measure(*dir, *n, 4096, func(i int) int64 { return int64(i%256) * 4096 }, nil)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%.0f fdatasync/s, p50 %.2f ms, p99 %.2f ms\n", rate, p50, p99)
		return
	}
	const rec = 1024
	size := int64(*n) * rec
	layouts := []struct {
		name string
		prep func(f *os.File) error
	}{
		{"appending", nil},
		{"fallocated", func(f *os.File) error { return unix.Fallocate(int(f.Fd()), 0, 0, size) }},
		{"pre-written", func(f *os.File) error {
			if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
				return err
			}
			return unix.Fdatasync(int(f.Fd()))
		}},
	}
	for _, l := range layouts {
		rate, p50, _, cpu, err := measure(*dir, *n, rec, func(i int) int64 { return int64(i) * rec }, l.prep)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%-11s 1 KiB records: %.0f fdatasync/s, p50 %.2f ms, %.0f µs CPU per write + fdatasync\n", l.name, rate, p50, cpu)
	}
}

// measure writes n blocks of size bytes at at(i), each followed by an fdatasync, into a fresh
// file prepared by prep; it returns the rate, p50 and p99 (ms), and the CPU µs per round.
func measure(dir string, n, size int, at func(int) int64, prep func(*os.File) error) (rate, p50, p99, cpuUs float64, err error) {
	f, err := os.CreateTemp(dir, "fsyncbench-*")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	if prep != nil {
		if err := prep(f); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	buf := make([]byte, size)
	lat := make([]time.Duration, 0, n)
	cpu0, start := cpuTime(), time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		if _, err := f.WriteAt(buf, at(i)); err != nil {
			return 0, 0, 0, 0, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, 0, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	total, cpu := time.Since(start), cpuTime()-cpu0
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return float64(n) / total.Seconds(), ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), float64(cpu.Microseconds()) / float64(n), nil
}

// cpuTime is the process's user + system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fsyncbench:", err)
	os.Exit(1)
}
