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
	h := s.Handles()
	h.MessagesProduced.Add(3)
	h.MessagesConsumed.Add(2)
	h.FsyncDuration.Observe(0.001)
	if got := testutil.ToFloat64(m.MessagesProduced.WithLabelValues("orders", "2")); got != 3 {
		t.Fatalf("produced = %v through the cached handle, want 3", got)
	}
	if s.Handles() != h {
		t.Fatal("handles resolved again without a DeleteTopic")
	}

	m.DeleteTopic("other")
	s.Handles().MessagesProduced.Add(1)
	if got := testutil.ToFloat64(m.MessagesProduced.WithLabelValues("orders", "2")); got != 4 {
		t.Fatalf("produced = %v after another topic's deletion, want 4", got)
	}

	m.DeleteTopic("orders")
	if n := testutil.CollectAndCount(m.MessagesProduced); n != 0 {
		t.Fatalf("%d produced series left after DeleteTopic", n)
	}
	s.Handles().MessagesProduced.Add(5)
	s.Handles().FsyncDuration.Observe(0.002)
	if got := testutil.ToFloat64(m.MessagesProduced.WithLabelValues("orders", "2")); got != 5 {
		t.Fatalf("produced = %v after DeleteTopic, want the new series' 5", got)
	}
	if n := testutil.CollectAndCount(m.StorageFsyncDuration); n != 1 {
		t.Fatalf("%d fsync series after DeleteTopic and an fsync, want 1", n)
	}
}
