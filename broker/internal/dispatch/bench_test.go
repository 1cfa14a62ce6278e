package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/wal"
)

// countingCommitter is a local committer that accepts everything (no I/O).
type countingCommitter struct{ n atomic.Int64 }

func (c *countingCommitter) Commit(_ context.Context, _ Destination, _ string, _ int, recs []wal.Record) error {
	c.n.Add(int64(len(recs)))
	return nil
}

// BenchmarkDispatch measures dispatcher throughput (records/s) from a WAL backlog spread over
// 16 partitions into a local no-op committer: scan, bucket, commit fan-out and checkpoint fsyncs.
// "tail" is the steady state (records still in memory), "disk" the catch-up after a restart.
func BenchmarkDispatch(b *testing.B) {
	for _, bc := range []struct {
		name string
		tail int64
	}{{"tail", 0}, {"disk", -1}} {
		b.Run(bc.name, func(b *testing.B) { benchDispatch(b, wal.Options{TailBytes: bc.tail}) })
	}
}

func benchDispatch(b *testing.B, opts wal.Options) {
	w, err := wal.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	topo := newFakeTopo()
	topo.set("t", "A", 16)
	batch := make([]wal.Record, 1000)
	for i := range batch {
		batch[i] = wal.Record{Topic: "t", Incarnation: "A", Key: "k", Partition: uint32(i % 16), Payload: make([]byte, 256)}
	}
	for appended := 0; appended < b.N; appended += len(batch) {
		if _, err := w.Append(context.Background(), batch[:min(len(batch), b.N-appended)]...); err != nil {
			b.Fatal(err)
		}
	}
	com := &countingCommitter{}
	d := New(w, topo, com, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	b.ReportAllocs()
	b.ResetTimer()
	go func() { done <- d.Run(ctx) }()
	for w.Checkpoint() < w.NextSeq() {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(com.n.Load())/b.Elapsed().Seconds(), "records/s")
}
