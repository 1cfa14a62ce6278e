package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// rerouteTopic creates "rr" (R = 2, M = 2, 3 partitions led by n1 with n9 as follower); the
// partitions in short have an ISR of n1 alone (below M).
func rerouteTopic(t *testing.T, n *testNode, short ...int) meta.Topic {
	t.Helper()
	rr := meta.Topic{Name: "rr", Partitions: 3, ReplicationFactor: 2, MinInsyncReplicas: 2, Incarnation: "00112233445566bb",
		Role: meta.RoleStandalone}
	var as []meta.Assignment
	for p := range 3 {
		a := meta.Assignment{Topic: "rr", Partition: p, Owner: "n1", Replicas: []string{"n1", "n9"}, ISR: []string{"n1", "n9"}}
		for _, s := range short {
			if s == p {
				a.ISR = []string{"n1"}
			}
		}
		as = append(as, a)
	}
	if err := n.store.CreateTopic(n.ctx(), rr, as); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { _, ok := n.e.view.Topic("rr"); return ok }, "topic rr visible")
	tp, _ := n.e.view.Topic("rr")
	return tp
}

// follow plays n9 following rr/p from this node's leadership until the test ends, so that
// the leader's HWM advances.
func follow(t *testing.T, n *testNode, tp meta.Topic, p int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var off, hwm int64
		for ctx.Err() == nil {
			rep, err := n.e.ReplicaHost().Fetch(ctx, tp.Name, p, tp.Incarnation,
				replica.FetchRequest{Follower: "n9", Offset: off, MaxBytes: 1 << 20, HWM: hwm}, 50*time.Millisecond)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond): // the leadership is not taken up yet
				}
				continue
			}
			off, hwm = rep.Next, rep.HWM
		}
	}()
}

// A keyless produce to a replicated topic goes around the partitions whose ISR is below
// min_insync_replicas; a keyed one whose key hashes there keeps the 503 not_enough_replicas.
func TestKeylessProduceAvoidsPartitionsBelowMinInsync(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := rerouteTopic(t, n, 0, 2)
	follow(t, n, tp, 1)
	eventually(t, 5*time.Second, func() bool { _, ok := n.e.ReplicaHost().Leader("rr", 1); return ok }, "n1 leads rr/1")
	for i := range 6 {
		rec := service.ProduceRecord{Partition: -1, Payload: []byte(fmt.Sprintf("m%d", i))}
		if err := n.e.Produce(n.ctx(), tp, []service.ProduceRecord{rec}); err != nil {
			t.Fatalf("keyless produce %d: %v", i, err)
		}
	}
	if got := n.e.parts.Peek("rr", 1).Log().HighWatermark(); got != 6 {
		t.Fatalf("rr/1 HWM = %d, want all 6 keyless records there", got)
	}
	for _, p := range []int{0, 2} {
		if pt := n.e.parts.Peek("rr", p); pt != nil && pt.Log().NextOffset() != 0 {
			t.Fatalf("rr/%d holds %d records, want none (ISR below M)", p, pt.Log().NextOffset())
		}
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k%d", i); keyPartition(k, 3) == 0 {
			key = k
		}
	}
	err := n.e.Produce(n.ctx(), tp, []service.ProduceRecord{{Partition: -1, Key: key, Payload: []byte("keyed")}})
	if !errors.Is(err, errcode.ErrNotEnoughReplicas) {
		t.Fatalf("keyed produce to rr/0 = %v, want not_enough_replicas", err)
	}
}

// A keyless batch its leader refuses with not_enough_replicas goes to the next partition the
// local replica shows able to take it; other errors, and keyless batches with nowhere else
// to go, keep their answer.
func TestKeylessBatchRefusedForMinInsyncGoesElsewhere(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := rerouteTopic(t, n, 2)
	recs := func() []wal.Record { return []wal.Record{{Topic: "rr", Partition: 0, Payload: []byte("x")}} }
	var tried []int
	refuse := map[int]error{0: fmt.Errorf("rr/0: %w", errcode.ErrNotEnoughReplicas)}
	commit := func(_ context.Context, _ meta.Topic, p int, rs []wal.Record) error {
		tried = append(tried, p)
		if int(rs[0].Partition) != p {
			return fmt.Errorf("record for %d sent to %d", rs[0].Partition, p)
		}
		return refuse[p]
	}
	if err := n.e.commitKeyless(n.ctx(), tp, 0, recs(), commit); err != nil || fmt.Sprint(tried) != "[0 1]" {
		t.Fatalf("commitKeyless = %v after %v, want rr/1 to take it after rr/0 refused (rr/2 is short)", err, tried)
	}
	tried, refuse[1] = nil, fmt.Errorf("rr/1: %w", errcode.ErrNotEnoughReplicas)
	if err := n.e.commitKeyless(n.ctx(), tp, 0, recs(), commit); !errors.Is(err, errcode.ErrNotEnoughReplicas) || fmt.Sprint(tried) != "[0 1]" {
		t.Fatalf("commitKeyless = %v after %v, want the last refusal once every able partition refused", err, tried)
	}
	tried, refuse[0] = nil, fmt.Errorf("rr/0: %w", errcode.ErrOwnerDown)
	if err := n.e.commitKeyless(n.ctx(), tp, 0, recs(), commit); !errors.Is(err, errcode.ErrOwnerDown) || fmt.Sprint(tried) != "[0]" {
		t.Fatalf("commitKeyless = %v after %v, want another error answered as is", err, tried)
	}
}

// A produce spread over several partitions of a replicated topic commits at their leaders
// at once: every partition's batch is appended while the first still waits for its ISR.
func TestReplicatedProduceCommitsPartitionsConcurrently(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := rerouteTopic(t, n)
	for p := range 3 {
		eventually(t, 5*time.Second, func() bool { _, ok := n.e.ReplicaHost().Leader("rr", p); return ok }, "n1 leads rr")
	}
	var recs []service.ProduceRecord
	for i := range 3 {
		recs = append(recs, service.ProduceRecord{Partition: i, Payload: []byte(fmt.Sprintf("m%d", i))})
	}
	done := make(chan error, 1)
	go func() { done <- n.e.Produce(n.ctx(), tp, recs) }()
	eventually(t, 5*time.Second, func() bool {
		for p := range 3 {
			if pt := n.e.parts.Peek("rr", p); pt == nil || pt.Log().NextOffset() != 1 {
				return false
			}
		}
		return true
	}, "every partition's batch appended while none is committed")
	select {
	case err := <-done:
		t.Fatalf("produce answered %v before any follower held the records", err)
	default:
	}
	for p := range 3 {
		follow(t, n, tp, p)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The keyless records of one produce to a replicated topic all go to one partition (one
// leader commit, one replication round trip), and successive produces take the partitions in
// turn; a keyed record in the same request keeps its own partition.
func TestKeylessRecordsOfOneReplicatedProduceShareAPartition(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := rerouteTopic(t, n)
	for p := range 3 {
		eventually(t, 5*time.Second, func() bool { _, ok := n.e.ReplicaHost().Leader("rr", p); return ok }, "n1 leads rr")
		follow(t, n, tp, p)
	}
	ends := func() (out [3]int64) {
		for p := range 3 {
			if pt := n.e.parts.Peek("rr", p); pt != nil {
				out[p] = pt.Log().NextOffset()
			}
		}
		return out
	}
	seen := map[int]bool{}
	for req := range 3 {
		before := ends()
		var recs []service.ProduceRecord
		for i := range 10 {
			recs = append(recs, service.ProduceRecord{Partition: -1, Payload: []byte(fmt.Sprintf("r%d-m%d", req, i))})
		}
		if err := n.e.Produce(n.ctx(), tp, recs); err != nil {
			t.Fatalf("produce %d: %v", req, err)
		}
		after := ends()
		took := -1
		for p := range 3 {
			switch d := after[p] - before[p]; d {
			case 0:
			case 10:
				took = p
			default:
				t.Fatalf("produce %d: rr/%d took %d of its 10 keyless records, want all or none", req, p, d)
			}
		}
		if took < 0 || seen[took] {
			t.Fatalf("produce %d went to rr/%d, want a partition no earlier produce took (ends %v → %v)", req, took, before, after)
		}
		seen[took] = true
	}
	key := "k0"
	kp := keyPartition(key, 3)
	before := ends()
	recs := []service.ProduceRecord{{Partition: -1, Payload: []byte("loose")}, {Partition: -1, Key: key, Payload: []byte("keyed")},
		{Partition: -1, Payload: []byte("loose too")}}
	if err := n.e.Produce(n.ctx(), tp, recs); err != nil {
		t.Fatal(err)
	}
	after := ends()
	var grew []int64
	for p := range 3 {
		grew = append(grew, after[p]-before[p])
	}
	if grew[kp] < 1 || grew[0]+grew[1]+grew[2] != 3 || slices.Max(grew) < 2 {
		t.Fatalf("mixed produce grew the partitions by %v, want the keyed record on rr/%d and both keyless ones together", grew, kp)
	}
}
