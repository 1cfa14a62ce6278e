// Command cpucal times a fixed CPU-only workload on one goroutine and prints its cost per
// operation, so benchmark figures taken on different machines (or on one machine under
// different load) are not confused: hack/bench-compare.sh prints it next to the disk's fsync
// rate (docs/benchmarks.md, "Comparing two builds").
//
// One operation sorts 65,536 pseudo-random integers, fills and reads a map of 4,096 entries
// and checksums 64 KiB with CRC-32C; its result is fixed (see the test), so a change to the
// workload, which would make old figures incomparable, fails the test.
package main

import (
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"time"
)

const (
	sortLen = 1 << 16
	mapLen  = 1 << 12
	crcLen  = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// input is the workload's fixed data: xorshift64 from a constant seed.
type input struct {
	nums  []uint64
	bytes []byte
}

func newInput() input {
	in := input{nums: make([]uint64, sortLen), bytes: make([]byte, crcLen)}
	x := uint64(0x9e3779b97f4a7c15)
	for i := range in.nums {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		in.nums[i] = x
		in.bytes[i%crcLen] = byte(x)
	}
	return in
}

// op is one operation; its result depends only on in.
func op(in input, scratch []uint64) uint64 {
	copy(scratch, in.nums)
	slices.Sort(scratch)
	m := make(map[uint64]uint64, mapLen)
	for _, v := range scratch[:mapLen] {
		m[v%mapLen] += v
	}
	var sum uint64
	for k := range uint64(mapLen) {
		sum += m[k]
	}
	return sum ^ scratch[sortLen/2] ^ uint64(crc32.Checksum(in.bytes, castagnoli))
}

// measure runs ops operations and returns the time per operation.
func measure(in input, ops int) time.Duration {
	scratch := make([]uint64, sortLen)
	start := time.Now()
	for range ops {
		op(in, scratch)
	}
	return time.Since(start) / time.Duration(ops)
}

func main() {
	ops := flag.Int("ops", 50, "operations per sample")
	samples := flag.Int("samples", 5, "samples; the fastest is reported")
	flag.Parse()
	if *ops < 1 || *samples < 1 {
		fmt.Fprintln(os.Stderr, "cpucal: -ops and -samples must be at least 1")
		os.Exit(2)
	}
	in := newInput()
	all := make([]time.Duration, *samples)
	for i := range all {
		all[i] = measure(in, *ops)
	}
	slices.Sort(all)
	fmt.Printf("%.0f µs/op (fastest of %d samples of %d; median %.0f)\n",
		float64(all[0])/1e3, *samples, *ops, float64(all[len(all)/2])/1e3)
}
