package metrics

import (
	"testing"
)

// TestKnownLabelSetsStartAtZeroAndGoWithTheirTopic: a fresh registry has a zero series for
// every known errors/reasons label set; InitPartition and InitLink create a topic's and a
// link's zero series, and DeleteTopic removes them all.
func TestKnownLabelSetsStartAtZeroAndGoWithTheirTopic(t *testing.T) {
	m := New()
	count := func(name string) int { return len(gather(t, m)[name].GetMetric()) }
	for name, want := range map[string]int{
		"narad_errors_total":             len(ErrorKinds),
		"narad_ack_rejected_total":       2,
		"narad_moves_total":              2,
		"narad_moves_blocked":            4,
		"narad_dispatched_records_total": 2,
		"narad_leader_elections_total":   5,
		"narad_isr_changes_total":        2,
		"narad_replication_bytes_total":  2,
	} {
		if got := count(name); got != want {
			t.Errorf("%s: %d series on a fresh registry, want %d", name, got, want)
		}
	}
	m.InitPartition("orders", "0")
	m.InitLink("orders", "audit")
	m.InitRemoteLink("orders", "remote:x@h:1", []string{"target_unreachable", "rejected"})
	for _, name := range []string{
		"narad_messages_produced_total", "narad_consumer_corrupt_skipped_total",
		"narad_storage_retention_bytes_deleted_total", "narad_produce_rejections_total",
		"narad_consume_wait_seconds", "narad_nack_total", "narad_fanout_child_dropped_messages",
		"narad_fanout_committed_total", "narad_fanout_remote_send_errors_total",
	} {
		if count(name) == 0 {
			t.Errorf("%s: no zero series after InitPartition/InitLink", name)
		}
	}
	if got := count("narad_produce_rejections_total"); got != len(ProduceRejectReasons) {
		t.Errorf("narad_produce_rejections_total: %d series, want one per reason", got)
	}
	m.DeleteTopic("orders")
	for name, f := range gather(t, m) {
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetValue() == "orders" {
					t.Errorf("%s%v survived DeleteTopic", name, s.GetLabel())
				}
			}
		}
	}
}
