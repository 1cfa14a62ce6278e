package engine

import (
	"testing"
	"time"

	"narad.dev/broker/internal/service"
)

// TestOldestUnconsumedAgeIsTheHeadRecordsAgeAndNeverDropsOnProduce: the gauge is now minus the
// commit time of the first unacked record (frontier + 1); a later produce (which rewrites the
// segment) does not lower it, an ack of the head moves it to the next record, and it is 0 once
// everything is acked.
func TestOldestUnconsumedAgeIsTheHeadRecordsAgeAndNeverDropsOnProduce(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "aging", Partitions: 3})
	labels := map[string]string{"topic": top.Name, "partition": "0"}
	age := func() float64 {
		n.e.pollGauges()
		return counterValue(t, n.m, "narad_oldest_unconsumed_message_age_seconds", labels)
	}

	n.clock.Step(-time.Hour) // the first records were committed an hour ago
	n.mustCommit(top, 0, "a", "b", "c")
	n.clock.Step(30 * time.Minute)
	n.mustCommit(top, 0, "d") // half an hour ago
	n.clock.Step(30 * time.Minute)
	msgs, err := n.e.Consume(n.ctx(), top, queueReq(0, 1)) // opens the shard, reserves "a"
	if err != nil || len(msgs) != 1 {
		t.Fatalf("consume: %d messages, err %v", len(msgs), err)
	}
	before := age()
	if before < 3600 || before > 3600+60 {
		t.Fatalf("age with records unconsumed since an hour = %.1f s, want about 3600", before)
	}
	n.mustCommit(top, 0, "e") // a produce now must not make the backlog look younger
	if after := age(); after < before {
		t.Fatalf("age dropped from %.1f to %.1f s after a produce while older records are unconsumed", before, after)
	}

	if errs := n.e.Ack(n.ctx(), top, []service.AckEntry{ackEntry(t, msgs[0], service.OpAck)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := age(); got < 3600 {
		t.Fatalf("after acking the head the age is %.1f s, want about 3600 (\"b\" is an hour old)", got)
	}
	var all []service.AckEntry
	for {
		ms, err := n.e.Consume(n.ctx(), top, queueReq(0, 10))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			all = append(all, ackEntry(t, m, service.OpAck))
		}
	}
	if len(all) != 4 {
		t.Fatalf("consumed %d of the 4 remaining records", len(all))
	}
	ackUpTo := func(k int) { // ack the first k of the remaining records
		for i, err := range n.e.Ack(n.ctx(), top, all[:k]) {
			if err != nil {
				t.Fatalf("ack %d: %v", i, err)
			}
		}
		all = all[k:]
	}
	ackUpTo(2) // "b", "c": the head is now "d", half an hour old
	if got := age(); got < 1800 || got >= 3600 {
		t.Fatalf("with \"d\" at the head the age is %.1f s, want about 1800", got)
	}
	ackUpTo(2)
	if got := age(); got != 0 {
		t.Fatalf("nothing unconsumed, age = %.1f s, want 0", got)
	}
}

// TestDataDirPollSetsTheFilesystemsCapacityAndFreeBytes: the disk-full alert divides
// narad_data_dir_available_bytes by narad_data_dir_capacity_bytes, so both come from the
// same statfs of the data directory and free never exceeds total.
func TestDataDirPollSetsTheFilesystemsCapacityAndFreeBytes(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	n.e.pollDataDir()
	free := counterValue(t, n.m, "narad_data_dir_available_bytes", nil)
	total := counterValue(t, n.m, "narad_data_dir_capacity_bytes", nil)
	if total <= 0 || free <= 0 || free > total {
		t.Fatalf("data dir available %.0f, capacity %.0f bytes: want 0 < available <= capacity", free, total)
	}
}
