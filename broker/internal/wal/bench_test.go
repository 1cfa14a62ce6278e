package wal

import (
	"context"
	"testing"
)

// BenchmarkAppendParallel measures group-committed appends from many goroutines (each Append
// one 256-byte record, like single produces); msg/s and fsyncs per op are reported.
func BenchmarkAppendParallel(b *testing.B) {
	obs := &syncCounter{}
	w := openT(b, b.TempDir(), Options{Observer: obs})
	b.SetParallelism(64) // many in-flight producers per core, like an HTTP server under load
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := testRecord(1)
		r.Payload = make([]byte, 256)
		for pb.Next() {
			if _, err := w.Append(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64(obs.syncs.Load())/float64(b.N), "fsyncs/op")
}

// BenchmarkAppendBatch measures batch produces: 100 records per Append from 16 producers.
func BenchmarkAppendBatch(b *testing.B) {
	w := openT(b, b.TempDir(), Options{})
	recs := make([]Record, 100)
	for i := range recs {
		recs[i] = testRecord(i)
		recs[i].Payload = make([]byte, 256)
	}
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := w.Append(context.Background(), recs...); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkReadFromTail measures the dispatcher's hot read path.
func BenchmarkReadFromTail(b *testing.B) {
	w := openT(b, b.TempDir(), Options{})
	recs := make([]Record, 4096)
	for i := range recs {
		recs[i] = testRecord(i)
	}
	if _, err := w.Append(context.Background(), recs...); err != nil {
		b.Fatal(err)
	}
	buf := make([]Entry, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		es, err := w.ReadInto(buf[:0], 0, 4096)
		if err != nil || len(es) != 4096 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*4096)/b.Elapsed().Seconds(), "records/s")
}
