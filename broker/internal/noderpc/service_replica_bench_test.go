package noderpc

import (
	"context"
	"syscall"
	"testing"
	"time"

	"narad.dev/broker/internal/log"
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
			leader := openReplicaNode(b)
			if err := leader.epochs.Assign(3, 0); err != nil {
				b.Fatal(err)
			}
			ld, err := replica.NewLeader(replica.LeaderConfig{Self: "a", Epoch: 3, Replicas: []string{"a", "b"},
				ISR: []string{"a", "b"}, MinISR: 2, Log: leader.log})
			if err != nil {
				b.Fatal(err)
			}
			const records = 64
			var offs []int64
			for range records {
				off, _, err := leader.log.Append([]log.Entry{{Payload: make([]byte, 1024)}}, 7)
				if err != nil {
					b.Fatal(err)
				}
				offs = append(offs, off)
			}
			host := replica.NewHost()
			host.Lead("orders", 0, "inc1", ld, leader.log, leader.epochs)
			addr, peers := replicaLoopback(b, host, "b")
			src := peers.ReplicaSource(addr, "orders", 0, "inc1", time.Second).(*replicaSource)
			src.unary = mode == "op34"
			ctx := context.Background()
			fetch := func(i int) {
				rep, err := src.Fetch(ctx, replica.FetchRequest{Epoch: 3, Offset: offs[i%records], MaxBytes: 1})
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
