package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/service"
)

func TestFailedIngressWALRecoversWhenTheDiskDoes(t *testing.T) {
	resetFaults(t)
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "disk", Partitions: 3})

	// Hold commits back so the acknowledged records exist only in the ingress WAL when it fails.
	faults.Set(plog.FaultVerify, nil)
	var acked []string
	for i := 0; i < 5; i++ {
		pl := fmt.Sprintf("before-%d", i)
		n.produce(top, service.ProduceRecord{Partition: -1, Payload: []byte(pl)})
		acked = append(acked, pl)
	}

	// The disk fills: the WAL fsync fails and the WAL fails closed.
	faults.Set("wal.fsync", errors.New("no space left on device"))
	err := n.e.Produce(n.ctx(), top, []service.ProduceRecord{{Partition: -1, Payload: []byte("refused")}})
	if !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("produce on a failing WAL: %v, want ErrUnavailable", err)
	}
	if err := n.e.Produce(n.ctx(), top, []service.ProduceRecord{{Partition: -1, Payload: []byte("refused-2")}}); !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("produce while the WAL is failed: %v, want ErrUnavailable", err)
	}

	// Space returns: within a few seconds produce works again without a restart.
	faults.Clear("wal.fsync")
	eventually(t, 10*time.Second, func() bool {
		return n.e.Produce(n.ctx(), top, []service.ProduceRecord{{Partition: -1, Payload: []byte("after-0")}}) == nil
	}, "produce succeeds after the WAL reopened")
	acked = append(acked, "after-0")
	for i := 1; i < 3; i++ {
		pl := fmt.Sprintf("after-%d", i)
		n.produce(top, service.ProduceRecord{Partition: -1, Payload: []byte(pl)})
		acked = append(acked, pl)
	}

	// Commits resume: every acknowledged record lands.
	faults.Clear(plog.FaultVerify)
	seen := n.waitVisible(top, acked...)
	for _, pl := range acked {
		if seen[pl] != 1 {
			t.Errorf("acknowledged %q visible %d times, want exactly once (all: %v)", pl, seen[pl], sortedKeys(seen))
		}
	}
}

func TestFailedLogCommitIsRetriedUntilTheRecordLands(t *testing.T) {
	for _, tc := range []struct {
		point string
		// every: the point fails every commit until cleared; otherwise only the first.
		every bool
		// exact: a failed commit leaves nothing behind, so the record lands exactly once.
		// A failed hwm persist puts the log in failed state; the reopen keeps the tail
		// hidden and the retry appends after it, so a later advance may expose a duplicate
		// (docs/internals/storage-format.md §7.4: duplicates, never loss).
		exact bool
	}{
		{plog.FaultVerify, true, true},
		{plog.FaultBeforeFsync, true, true},
		{plog.FaultHWMPersist, false, false},
	} {
		t.Run(tc.point, func(t *testing.T) {
			resetFaults(t)
			n := startNode(t, t.TempDir(), nil)
			top := n.createTopic(service.CreateTopicRequest{Name: "verify", Partitions: 3})
			failures := func() float64 {
				return counterValue(t, n.m, "narad_errors_total", map[string]string{"component": "messaging", "kind": "append"})
			}

			if tc.every {
				faults.Set(tc.point, nil)
			} else {
				faults.SetNth(tc.point, 1, nil)
			}
			n.produce(top, service.ProduceRecord{Key: "k", Partition: -1, Payload: []byte("precious")})
			if tc.every {
				eventually(t, 10*time.Second, func() bool { return failures() >= 2 }, "the dispatcher retries the failing commit")
				if msgs := n.replayAll(top); len(msgs) != 0 {
					t.Fatalf("a failed commit left visible records: %+v", msgs)
				}
				for p := 0; p < top.Partitions; p++ {
					if pt := n.e.parts.Peek(top.Name, p); pt != nil && pt.Log().NextOffset() != 0 {
						t.Fatalf("partition %d next_offset %d after failed commits: frames were not truncated", p, pt.Log().NextOffset())
					}
				}
				faults.Clear(tc.point)
			} else {
				eventually(t, 10*time.Second, func() bool { return failures() >= 1 }, "the commit failed once")
			}

			seen := n.waitVisible(top, "precious")
			if tc.exact && seen["precious"] != 1 {
				t.Fatalf("record visible %d times, want exactly once", seen["precious"])
			}
			eventually(t, 10*time.Second, func() bool { return n.e.Undispatched() == 0 }, "WAL checkpoint passes the record")
		})
	}
}
