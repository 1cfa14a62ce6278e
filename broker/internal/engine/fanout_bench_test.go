package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// benchRecords is the parent backlog each fan-out benchmark copies.
const benchRecords = 100_000

// fillPartition commits n 1 KiB records to partition 0 of t in batches of 1,000 and returns the
// commit rate (records/s): the single-partition produce commit rate fan-out is compared with.
func fillPartition(b *testing.B, n *testNode, t meta.Topic, count int) float64 {
	payload := bytes.Repeat([]byte("x"), 1024)
	batch := make([]wal.Record, 1000)
	for i := range batch {
		batch[i] = wal.Record{Topic: t.Name, Incarnation: t.Incarnation, Payload: payload}
	}
	start := time.Now()
	for done := 0; done < count; done += len(batch) {
		if _, err := n.e.CommitLocal(context.Background(), t.Name, t.Incarnation, 0, batch); err != nil {
			b.Fatal(err)
		}
	}
	return float64(count) / time.Since(start).Seconds()
}

// produceRate produces count 1 KiB records through the node's produce path (ingress WAL group
// commit → dispatcher → partition commit), all pinned to partition 0 of t, from 16 concurrent
// producers sending 100 records per call, and returns records/s until the last is committed:
// the node's single-partition produce commit rate.
func produceRate(b *testing.B, n *testNode, t meta.Topic, count int) float64 {
	payload := bytes.Repeat([]byte("p"), 1024)
	recs := make([]service.ProduceRecord, 100)
	for i := range recs {
		recs[i] = service.ProduceRecord{Partition: 0, Payload: payload}
	}
	hwm0 := n.e.LocalPartitionStats(t, 0)[0].HighWatermark
	start := time.Now()
	var wg sync.WaitGroup
	per := count / 16 / len(recs)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if err := n.e.Produce(context.Background(), t, recs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := hwm0 + int64(16*per*len(recs))
	for n.e.LocalPartitionStats(t, 0)[0].HighWatermark < want {
		time.Sleep(time.Millisecond)
	}
	return float64(16*per*len(recs)) / time.Since(start).Seconds()
}

// benchFanout attaches children to a parent whose partition 0 then receives benchRecords,
// starts the fan-out runner and measures how fast the cursors copy the backlog into every child.
func benchFanout(b *testing.B, children int) {
	for range b.N {
		n := startNode(b, b.TempDir(), nil)
		ctx := context.Background()
		if _, err := n.e.CreateTopic(ctx, service.CreateTopicRequest{Name: "bp", Partitions: 3}); err != nil {
			b.Fatal(err)
		}
		names := make([]string, children)
		for i := range names {
			names[i] = fmt.Sprintf("bc%d", i)
			if _, err := n.e.CreateTopic(ctx, service.CreateTopicRequest{Name: names[i], Partitions: 3}); err != nil {
				b.Fatal(err)
			}
			if _, err := n.e.AttachChild(ctx, "bp", names[i], 0); err != nil {
				b.Fatal(err)
			}
		}
		parent, _ := n.e.Topic("bp")
		sink := n.createTopic(service.CreateTopicRequest{Name: "bsink", Partitions: 3})
		produced := produceRate(b, n, sink, benchRecords)
		commitRate := fillPartition(b, n, parent, benchRecords)

		r, err := fanout.NewRunner(fanout.Config{Host: n.e.FanoutHost(), Tick: 10 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); _ = r.Run(rctx) }()
		for _, c := range names {
			ct, _ := n.e.Topic(c)
			for {
				var sum int64
				for _, st := range n.e.LocalPartitionStats(ct, -1) {
					sum += st.HighWatermark
				}
				if sum >= benchRecords {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		elapsed := time.Since(start)
		stop()
		<-done
		perChild := float64(benchRecords) / elapsed.Seconds()
		b.ReportMetric(perChild, "records/s/child")
		b.ReportMetric(perChild*float64(children), "records/s")
		b.ReportMetric(perChild*float64(children)*1024/1e6, "MB/s")
		b.ReportMetric(commitRate, "commit-records/s")
		b.ReportMetric(perChild/commitRate, "copy/commit")
		b.ReportMetric(produced, "produce-records/s")
		b.ReportMetric(perChild/produced, "copy/produce")
	}
}

// BenchmarkFanoutOneCursor: one child, one busy parent partition (one cursor copies at
// least 50 % of the single-partition produce commit rate).
func BenchmarkFanoutOneCursor(b *testing.B) { benchFanout(b, 1) }

// BenchmarkFanoutTenChildren: ten children of one parent partition copying concurrently.
func BenchmarkFanoutTenChildren(b *testing.B) { benchFanout(b, 10) }
