package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A partition's cached series are the registry's series of its labels, and they survive a
// DeleteTopic of their topic: updates after it are exported again, not lost in a detached
// series; another topic's deletion leaves the counts in place.
func TestPartitionSeriesFollowDeleteTopic(t *testing.T) {
	m := New()
	s := m.PartitionSeries("orders", Partition(2))
	s.Produced().Messages.Add(3)
	s.Consumed().Messages.Add(2)
	s.Fsync().Observe(0.001)
	if got := testutil.ToFloat64(m.MessagesProduced.WithLabelValues("orders", "2")); got != 3 {
		t.Fatalf("produced = %v through the cached handle, want 3", got)
	}
	if s.Produced() != s.Produced() || s.Fsync() != s.Fsync() {
		t.Fatal("handles resolved again without a DeleteTopic")
	}

	m.DeleteTopic("other")
	s.Produced().Messages.Add(1)
	if got := testutil.ToFloat64(m.MessagesProduced.WithLabelValues("orders", "2")); got != 4 {
		t.Fatalf("produced = %v after another topic's deletion, want 4", got)
	}

	m.DeleteTopic("orders")
	if n := testutil.CollectAndCount(m.MessagesProduced); n != 0 {
		t.Fatalf("%d produced series left after DeleteTopic", n)
	}
	s.Produced().Messages.Add(5)
	s.Fsync().Observe(0.002)
	if got := testutil.ToFloat64(m.MessagesProduced.WithLabelValues("orders", "2")); got != 5 {
		t.Fatalf("produced = %v after DeleteTopic, want the new series' 5", got)
	}
	if n := testutil.CollectAndCount(m.StorageFsyncDuration); n != 1 {
		t.Fatalf("%d fsync series after DeleteTopic and an fsync, want 1", n)
	}
}

// Each group of a partition's series appears with its first event, as a WithLabelValues at
// the event would make it: a produce and its flush and fsync export no consumed series (a
// follower's or an unread partition's), no hwm-persist series until one is persisted.
func TestPartitionSeriesAppearWithTheirFirstEvent(t *testing.T) {
	m := New()
	s := m.PartitionSeries("orders", Partition(0))
	s.Produced().Messages.Add(1)
	s.Produced().Bytes.Add(10)
	s.Flush().Time.Observe(0.001)
	s.Fsync().Observe(0.001)
	for name, n := range map[string]int{
		"produced messages": testutil.CollectAndCount(m.MessagesProduced),
		"produced bytes":    testutil.CollectAndCount(m.BytesProduced),
		"flush":             testutil.CollectAndCount(m.StorageFlushDuration),
		"fsync":             testutil.CollectAndCount(m.StorageFsyncDuration),
	} {
		if n != 1 {
			t.Fatalf("%d %s series after a produce, flush and fsync, want 1", n, name)
		}
	}
	for name, n := range map[string]int{
		"consumed messages": testutil.CollectAndCount(m.MessagesConsumed),
		"consumed bytes":    testutil.CollectAndCount(m.BytesConsumed),
		"hwm persist":       testutil.CollectAndCount(m.StorageHWMPersist),
	} {
		if n != 0 {
			t.Fatalf("%d %s series before any such event, want none", n, name)
		}
	}
	s.Consumed().Messages.Add(1)
	if n := testutil.CollectAndCount(m.MessagesConsumed); n != 1 {
		t.Fatalf("%d consumed series after a consume, want 1", n)
	}
}
