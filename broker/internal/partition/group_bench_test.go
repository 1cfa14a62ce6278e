package partition

import (
	"context"
	"testing"

	"narad.dev/broker/internal/wal"
)

// BenchmarkCommitReplicatedConcurrent: 8 producers per core commit one 256-byte record each
// to a leader whose ISR is itself (M = 1), so each commit costs its share of the leader's
// append and fsync only; fsyncs/op shows how many commits one fsync serves.
func BenchmarkCommitReplicatedConcurrent(b *testing.B) {
	f, _ := leaderFixture(b, []string{"a"}, 1)
	before := fsyncs(b, f)
	recs := []wal.Record{{Payload: make([]byte, 256)}}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.r.CommitReplicated(context.Background(), f.topic, 0, recs); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(fsyncs(b, f)-before)/float64(b.N), "fsyncs/op")
}
