// Command fsyncbench measures the disk's own fsync rate (4 KiB write + fdatasync) for
// reference next to the broker benchmarks.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the filesystem to measure")
	n := flag.Int("n", 2000, "number of write+fdatasync rounds")
	flag.Parse()
	f, err := os.CreateTemp(*dir, "fsyncbench-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsyncbench:", err)
		os.Exit(1)
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, *n)
	start := time.Now()
	for i := 0; i < *n; i++ {
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncbench:", err)
			os.Exit(1)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncbench:", err)
			os.Exit(1)
		}
		lat = append(lat, time.Since(t))
	}
	total := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%.0f fdatasync/s, p50 %.2f ms, p99 %.2f ms\n", float64(*n)/total.Seconds(),
		float64(lat[len(lat)/2].Microseconds())/1000, float64(lat[len(lat)*99/100].Microseconds())/1000)
}
