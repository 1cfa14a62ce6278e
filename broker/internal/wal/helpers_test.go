package wal

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/faults"
)

// syncCounter is an Observer counting batches (one write + one fdatasync each) and records.
type syncCounter struct {
	syncs, records atomic.Int64
}

func (c *syncCounter) ObserveSync(_ time.Duration, records int) {
	c.syncs.Add(1)
	c.records.Add(int64(records))
}

func openT(t testing.TB, dir string, opts Options) *WAL {
	t.Helper()
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func testRecord(i int) Record {
	return Record{
		Topic:        "orders",
		Incarnation:  "inc-1",
		Key:          fmt.Sprintf("k%d", i%7),
		Partition:    uint32(i % 3),
		AcceptedAtMs: 1_700_000_000_000 + int64(i),
		Payload:      []byte(fmt.Sprintf("payload-%06d", i)),
	}
}

func appendN(t testing.TB, w *WAL, from, n int) uint64 {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = testRecord(from + i)
	}
	first, err := w.Append(context.Background(), recs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return first
}

func sameRecord(a, b Record) bool {
	return a.Topic == b.Topic && a.Incarnation == b.Incarnation && a.Key == b.Key &&
		a.Partition == b.Partition && a.AcceptedAtMs == b.AcceptedAtMs && bytes.Equal(a.Payload, b.Payload)
}

// checkEntries asserts es are seqs from.. with testRecord(base+seq-from) contents.
func checkEntries(t testing.TB, es []Entry, from uint64, recIndex func(seq uint64) int) {
	t.Helper()
	for i, e := range es {
		if e.Seq != from+uint64(i) {
			t.Fatalf("entry %d: seq %d, want %d", i, e.Seq, from+uint64(i))
		}
		if want := testRecord(recIndex(e.Seq)); !sameRecord(e.Record, want) {
			t.Fatalf("seq %d: got %+v, want %+v", e.Seq, e.Record, want)
		}
	}
}

func resetFaults(t testing.TB) {
	t.Helper()
	faults.Reset()
	t.Cleanup(faults.Reset)
}
