package noderpc

import (
	"context"
	"syscall"
	"testing"
	"time"

	"narad.dev/broker/internal/replica"
)

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplicaFetch is one follower fetch of one 1 KiB record over real node RPC on
// loopback, both ends in this process: on the op 37 stream, and as op 34 calls. cpu-µs/op is
// the process's CPU per fetch, both ends together.
//
//	go test -run XXX -bench ReplicaFetch -benchtime 20000x ./internal/noderpc/
func BenchmarkReplicaFetch(b *testing.B) {
	for _, mode := range []string{"stream", "op34"} {
		b.Run(mode, func(b *testing.B) {
			const records = 64
			host, _ := leadingHost(b, records, 1024)
			addr, peers := replicaLoopback(b, host, "b")
			src := peers.ReplicaSource(addr, "orders", 0, "inc1", time.Second).(*replicaSource)
			src.unary = mode == "op34"
			ctx := context.Background()
			fetch := func(i int) {
				rep, err := src.Fetch(ctx, replica.FetchRequest{Epoch: 3, Offset: int64(i % records), MaxBytes: 1})
				if err != nil {
					b.Fatal(err)
				}
				if rep.Release != nil {
					rep.Release()
				}
			}
			fetch(0)
			cpu := processCPU()
			b.ResetTimer()
			for i := range b.N {
				fetch(i)
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
