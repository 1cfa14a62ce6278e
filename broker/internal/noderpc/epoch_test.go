package noderpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/testwait"
)

// Consume (op 2) and AckBatch (op 31) of a replicated partition serve only under the leader
// epoch the owner leads at (docs/internals/replication.md §7): an older or newer epoch is
// refused with 409 stale_epoch, which the caller reads as a retry; a request naming no epoch
// is served as before.
func TestConsumeAndAckRefuseAStaleLeaderEpoch(t *testing.T) {
	s, e, store := newNodeService(t)
	s.replicas = e.ReplicaHost()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rr := meta.Topic{Name: "rr", Partitions: 1, ReplicationFactor: 2, MinInsyncReplicas: 1, Incarnation: "00112233445566cc",
		Role: meta.RoleStandalone}
	if err := store.CreateTopic(ctx, rr, []meta.Assignment{{Topic: "rr", Partition: 0, Owner: "n1",
		Replicas: []string{"n1", "n2"}, ISR: []string{"n1"}}}); err != nil {
		t.Fatal(err)
	}
	leadsAt := func(epoch uint64) func() bool {
		return func() bool { ld, ok := e.ReplicaHost().Leader("rr", 0); return ok && ld.Epoch() == epoch }
	}
	testwait.For(t, 10*time.Second, "n1 leads rr/0 at epoch 0", leadsAt(0))
	tp, _ := store.Topic("rr")
	p0 := 0
	if err := e.Produce(ctx, tp, []service.ProduceRecord{{Partition: p0, Payload: []byte("a")}, {Partition: p0, Payload: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	epoch := func(v uint64) *uint64 { return &v }
	replay := func(ep *uint64) *nodepb.ConsumeReply {
		t.Helper()
		rep, err := s.Consume(ctx, &nodepb.ConsumeRequest{Topic: "rr", Partition: 0, Offset: 0, MaxMessages: 10, LeaderEpoch: ep})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, tc := range []struct {
		name   string
		ep     *uint64
		status int32
	}{{"current epoch", epoch(0), 200}, {"no epoch", nil, 200}, {"a future epoch", epoch(1), 409}} {
		if rep := replay(tc.ep); rep.Status != tc.status || (tc.status == 409 && rep.Reason != "stale_epoch") {
			t.Fatalf("%s: %d %q %q, want %d", tc.name, rep.Status, rep.Reason, rep.Error, tc.status)
		}
	}

	// A lease taken under epoch 0, then the partition is re-elected (epoch 1).
	rep, err := s.Consume(ctx, &nodepb.ConsumeRequest{Topic: "rr", Partition: 0, Offset: -1, MaxMessages: 2, LeaderEpoch: epoch(0)})
	if err != nil || rep.Status != 200 || len(rep.Messages) != 2 {
		t.Fatalf("reserve: %+v %v", rep, err)
	}
	hs := make([]consume.Handle, 2)
	for i, m := range rep.Messages {
		if hs[i], err = consume.ParseHandle(m.ReceiptHandle); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := store.ElectLeader(ctx, "rr", 0, 0, "n1", meta.ElectPreferred); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "n1 leads rr/0 at epoch 1", leadsAt(1))
	if rep := replay(epoch(0)); rep.Status != 409 || rep.Reason != "stale_epoch" {
		t.Fatalf("replay under the old epoch: %d %q, want 409 stale_epoch", rep.Status, rep.Reason)
	}
	ack, err := s.AckBatch(ctx, &nodepb.AckBatchRequest{Topic: "rr", Entries: []*nodepb.AckEntry{
		{Partition: 0, Offset: hs[0].Offset, Nonce: hs[0].Nonce, Mode: nodepb.AckMode_ACK_MODE_ACK, LeaderEpoch: epoch(0)},
		{Partition: 0, Offset: hs[1].Offset, Nonce: hs[1].Nonce, Mode: nodepb.AckMode_ACK_MODE_ACK, LeaderEpoch: epoch(1)},
	}})
	if err != nil || ack.Status != 200 || len(ack.Results) != 2 {
		t.Fatalf("ack batch: %+v %v", ack, err)
	}
	r0, r1 := ack.Results[0], ack.Results[1]
	if r0.Status != 409 || r0.Reason != "stale_epoch" {
		t.Fatalf("ack under the old epoch: %+v, want 409 stale_epoch", r0)
	}
	if got := errcode.AckResult.Error(r0.Status, r0.Reason, r0.Error); !errors.Is(got, errcode.ErrUnavailable) {
		t.Fatalf("the caller reads a stale epoch as %v, want unavailable (retry)", got)
	}
	if got := errcode.Consume.Error(409, "stale_epoch", "x"); !errors.Is(got, errcode.ErrStaleEpoch) {
		t.Fatalf("the consume caller reads a stale epoch as %v", got)
	}
	if r1.Status != 204 && r1.Status != 410 {
		t.Fatalf("ack under the current epoch: %+v, want it past the fence (204, or 410 for a lease the new term dropped)", r1)
	}
}

// The optional field carries epoch 0 as a value, distinct from no epoch.
func TestLeaderEpochWireForm(t *testing.T) {
	if wireEpoch(service.LeaderEpoch{}) != nil {
		t.Fatal("no epoch sent as a value")
	}
	for _, v := range []uint64{0, 7} {
		got := epochFromWire(wireEpoch(service.EpochOf(v)))
		if got != service.EpochOf(v) {
			t.Fatalf("epoch %d round-trips as %+v", v, got)
		}
	}
	if epochFromWire(nil).Set {
		t.Fatal("an absent field reads as set")
	}
}
