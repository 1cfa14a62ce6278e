package engine

import (
	"context"
	"testing"
	"time"

	"narad.dev/broker/internal/service"
)

// closedAt returns n open channels of which the one at idx is closed.
func closedAt(n, idx int) []<-chan struct{} {
	chans := make([]<-chan struct{}, n)
	for i := range chans {
		c := make(chan struct{})
		if i == idx {
			close(c)
		}
		chans[i] = c
	}
	return chans
}

// TestParkReturnsIndexOfFiredChannel proves both paths of park (the fixed select for up to
// four channels and reflect.Select beyond) report which channel woke it.
func TestParkReturnsIndexOfFiredChannel(t *testing.T) {
	for n := 1; n <= 6; n++ {
		for idx := range n {
			if got := park(context.Background(), closedAt(n, idx), time.Hour); got != idx {
				t.Errorf("%d channels, #%d closed: park = %d", n, idx, got)
			}
		}
		if got := park(context.Background(), closedAt(n, -1), time.Microsecond); got != parkTimeout {
			t.Errorf("%d channels, none closed: park = %d, want parkTimeout", n, got)
		}
	}
}

// TestParkFewChannelsAllocatesOnlyTheTimer proves a long-poll over the common channel set
// (three partitions and the remote-notice token) no longer pays reflect.Select's allocations.
func TestParkFewChannelsAllocatesOnlyTheTimer(t *testing.T) {
	chans := closedAt(4, 3)
	ctx := context.Background()
	timer := testing.AllocsPerRun(100, func() { time.NewTimer(time.Hour).Stop() })
	allocs := testing.AllocsPerRun(100, func() {
		if park(ctx, chans, time.Hour) != 3 {
			t.Fatal("wrong channel")
		}
	})
	if allocs > timer {
		t.Fatalf("%v allocations per park, want at most the timer's %v", allocs, timer)
	}
}

// TestAckOfOneLocalEntryAllocatesOnlyItsResult guards the single-message ack: an entry this
// node owns goes straight to its shard, without the routing tables and the sort of a batch.
func TestAckOfOneLocalEntryAllocatesOnlyItsResult(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "orders", Partitions: 3})
	n.produce(top, service.ProduceRecord{Partition: 0, Payload: []byte("a")})
	var msgs []service.Message
	eventually(t, 10*time.Second, func() bool {
		var err error
		msgs, err = n.e.Consume(n.ctx(), top, queueReq(time.Second, 1))
		return err == nil && len(msgs) == 1
	}, "the message to be consumable")
	extend := []service.AckEntry{ackEntry(t, msgs[0], service.OpExtend)}
	ctx := n.ctx()
	allocs := testing.AllocsPerRun(100, func() {
		if errs := n.e.Ack(ctx, top, extend); errs[0] != nil {
			t.Fatal(errs[0])
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per single ack, want at most 1 (the result)", allocs)
	}
}
