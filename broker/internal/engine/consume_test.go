package engine

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/service"
)

func ackEntry(t *testing.T, m service.Message, op service.AckOp) service.AckEntry {
	t.Helper()
	h, err := consume.ParseHandle(m.ReceiptHandle)
	if err != nil {
		t.Fatalf("receipt handle %q: %v", m.ReceiptHandle, err)
	}
	if h.Partition != m.Partition || h.Offset != m.Offset {
		t.Fatalf("handle %q does not name %d@%d", m.ReceiptHandle, m.Partition, m.Offset)
	}
	return service.AckEntry{Partition: h.Partition, Offset: h.Offset, Nonce: h.Nonce, Op: op}
}

func TestProduceDispatchCommitConsumeAckRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "orders", Partitions: 3})
	want := map[string]string{"a": "k1", "b": "", "c": "k3", "d": "", "e": ""}
	for pl, key := range want {
		n.produce(top, service.ProduceRecord{Key: key, Partition: -1, Payload: []byte(pl)})
	}

	got := map[string]service.Message{}
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		msgs, err := n.e.Consume(n.ctx(), top, queueReq(2*time.Second, 10))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if _, dup := got[string(m.Payload)]; dup {
				t.Fatalf("payload %q delivered twice while its lease is live", m.Payload)
			}
			got[string(m.Payload)] = m
		}
	}
	if len(got) != len(want) {
		t.Fatalf("consumed %d of %d messages", len(got), len(want))
	}
	var entries []service.AckEntry
	for pl, m := range got {
		if string(m.Key) != want[pl] {
			t.Errorf("payload %q: key %q, want %q", pl, m.Key, want[pl])
		}
		if m.Topic != "orders" || m.ReceiptHandle == "" || m.CommittedAtMs == 0 {
			t.Errorf("message %+v lacks topic, handle or commit time", m)
		}
		entries = append(entries, ackEntry(t, m, service.OpAck))
	}
	for i, err := range n.e.Ack(n.ctx(), top, entries) {
		if err != nil {
			t.Errorf("ack %d: %v", i, err)
		}
	}
	// Everything acked: nothing left to deliver, and the frontier of every partition is at
	// its high watermark.
	if msgs, err := n.e.Consume(n.ctx(), top, queueReq(0, 10)); err != nil || len(msgs) != 0 {
		t.Fatalf("after acking everything consume returned %d messages, err %v", len(msgs), err)
	}
	for p := 0; p < top.Partitions; p++ {
		pt := n.e.parts.Peek(top.Name, p)
		if pt == nil || pt.Shard() == nil {
			continue
		}
		if st, hwm := pt.Shard().State(), pt.Log().HighWatermark(); st.Committed != hwm-1 {
			t.Errorf("partition %d: frontier %d, want hwm-1 = %d", p, st.Committed, hwm-1)
		}
	}
	// Acking the same handles again: no live reservation → stale.
	for i, err := range n.e.Ack(n.ctx(), top, entries) {
		if !errors.Is(err, errcode.ErrStale) {
			t.Errorf("second ack %d: %v, want ErrStale", i, err)
		}
	}
}

func TestReplayReturnsExactBytesAndReservesNothing(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "bin", Partitions: 3})
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte(i)
	}
	n.produce(top, service.ProduceRecord{Key: "k\x00\xff", Partition: 1, Payload: payload})

	var msgs []service.Message
	eventually(t, 15*time.Second, func() bool { msgs = n.replay(top, 1); return len(msgs) == 1 }, "record committed")
	m := msgs[0]
	if !bytes.Equal(m.Payload, payload) || string(m.Key) != "k\x00\xff" || m.Offset != 0 || m.Partition != 1 {
		t.Fatalf("replay returned %+v, want the exact bytes at 1@0", m)
	}
	if m.ReceiptHandle != "" {
		t.Fatalf("replay returned a receipt handle %q", m.ReceiptHandle)
	}
	// Replaying past the high watermark is empty, not an error.
	if got, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 1, Offset: 1, Max: 10}); err != nil || len(got) != 0 {
		t.Fatalf("replay at hwm: %d messages, err %v", len(got), err)
	}
	if pt := n.e.parts.Peek(top.Name, 1); pt != nil && pt.Shard() != nil && pt.Shard().State().InFlight != 0 {
		t.Fatalf("replay left %d reservations", pt.Shard().State().InFlight)
	}
	// A queue consume still gets offset 0: the replay neither reserved nor acked it.
	got, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 1, Offset: -1, Max: 1})
	if err != nil || len(got) != 1 || got[0].Offset != 0 || !bytes.Equal(got[0].Payload, payload) {
		t.Fatalf("queue consume after replay: %+v, err %v", got, err)
	}
}

func TestLongPollWakesOnCommit(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "poll", Partitions: 3})
	// Open the partitions so the waiter parks on their notify channels.
	for p := 0; p < top.Partitions; p++ {
		n.replay(top, p)
	}
	type result struct {
		msgs []service.Message
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		msgs, err := n.e.Consume(n.ctx(), top, queueReq(5*time.Second, 1))
		done <- result{msgs, err, time.Since(start)}
	}()
	waitGoroutine(t, "select", "narad.dev/broker/internal/engine.park")
	n.produce(top, service.ProduceRecord{Partition: -1, Payload: []byte("wake")})
	r := <-done
	if r.err != nil || len(r.msgs) != 1 || string(r.msgs[0].Payload) != "wake" {
		t.Fatalf("long-poll returned %+v, err %v", r.msgs, r.err)
	}
	if r.took >= 5*time.Second {
		t.Fatalf("long-poll returned after %s: it waited out its budget instead of waking", r.took)
	}
}

func TestAckWithoutLiveShardIsStale(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "acks", Partitions: 3})

	// Unknown shard: partition 2 was never opened here.
	errs := n.e.Ack(n.ctx(), top, []service.AckEntry{{Partition: 2, Offset: 0, Nonce: 1, Op: service.OpAck}})
	if !errors.Is(errs[0], errcode.ErrStale) {
		t.Fatalf("ack on a never-opened shard: %v, want ErrStale", errs[0])
	}

	// Closed shard: a live handle stops validating once its partition log is closed.
	n.mustCommit(top, 0, "x")
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("consume: %v %v", msgs, err)
	}
	n.e.parts.ClosePartition(n.e.parts.Peek(top.Name, 0))
	for _, op := range []service.AckOp{service.OpAck, service.OpExtend, service.OpNack} {
		errs = n.e.Ack(n.ctx(), top, []service.AckEntry{ackEntry(t, msgs[0], op)})
		if !errors.Is(errs[0], errcode.ErrStale) {
			t.Errorf("op %d on a closed shard: %v, want ErrStale", op, errs[0])
		}
	}
	if got := counterValue(t, n.m, "narad_ack_rejected_total", map[string]string{"reason": "stale"}); got != 4 {
		t.Errorf("narad_ack_rejected_total{reason=stale} = %v, want 4", got)
	}
}

func TestExpiredLeaseIsRedeliveredByBackgroundPurger(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "vis", Partitions: 3, VisibilityTimeoutMs: 60_000})
	n.mustCommit(top, 0, "m")
	first, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 1})
	if err != nil || len(first) != 1 {
		t.Fatalf("consume: %v %v", first, err)
	}
	shard := n.e.parts.Peek(top.Name, 0).Shard()
	if st := shard.State(); st.InFlight != 1 {
		t.Fatalf("in flight %d after reserve, want 1", st.InFlight)
	}
	// The consumer dies; its lease runs out. Nobody touches the shard: only the 1 s
	// background purger can release it.
	n.clock.Step(61 * time.Second)
	eventually(t, 5*time.Second, func() bool { return shard.State().InFlight == 0 }, "purger releases the expired lease")

	again, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 1})
	if err != nil || len(again) != 1 || again[0].Offset != first[0].Offset {
		t.Fatalf("redelivery: %+v, err %v", again, err)
	}
	if again[0].ReceiptHandle == first[0].ReceiptHandle {
		t.Fatalf("redelivery reused handle %q", again[0].ReceiptHandle)
	}
	errs := n.e.Ack(n.ctx(), top, []service.AckEntry{ackEntry(t, first[0], service.OpAck), ackEntry(t, again[0], service.OpAck)})
	if !errors.Is(errs[0], errcode.ErrStale) || errs[1] != nil {
		t.Fatalf("acks (old, new handle) = %v, want [ErrStale nil]", errs)
	}
}

// sortedKeys is a stable rendering of a payload count map for messages.
func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestParkWakesOnAnyNotifyChannelAndStopsOnCancel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		chans    int
		closeIdx int // -1: none closed
		cancel   bool
		d        time.Duration
		want     bool
	}{
		{"single channel closed", 1, 0, false, time.Hour, true},
		{"last of three closed", 3, 2, false, time.Hour, true},
		{"first of three closed", 3, 0, false, time.Hour, true},
		{"interval passes", 3, -1, false, time.Millisecond, true},
		{"single channel, ctx cancelled", 1, -1, true, time.Hour, false},
		{"three channels, ctx cancelled", 3, -1, true, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			chans := make([]<-chan struct{}, tc.chans)
			for i := range chans {
				c := make(chan struct{})
				if i == tc.closeIdx {
					close(c)
				}
				chans[i] = c
			}
			if tc.cancel {
				cancel()
			}
			done := make(chan bool, 1)
			go func() { done <- park(ctx, chans, tc.d) != parkCancelled }()
			select {
			case got := <-done:
				if got != tc.want {
					t.Fatalf("park = %v, want %v", got, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("park did not return: a closed notify channel or cancelled ctx did not wake it")
			}
		})
	}
}
