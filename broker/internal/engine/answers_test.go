package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/testwait"
)

func TestAnswerBudgetGrantsWhatFitsNeverLessThanOneMessage(t *testing.T) {
	b := newAnswerBudget(10 << 20)
	if g := b.grant(consume.DefaultMaxBytes); g != consume.DefaultMaxBytes {
		t.Fatalf("first grant %d, want a full answer", g)
	}
	if g := b.grant(consume.DefaultMaxBytes); g != 2<<20 {
		t.Fatalf("second grant %d, want the 2 MiB left", g)
	}
	if g := b.grant(100); g != 0 {
		t.Fatalf("a spent budget granted %d", g)
	}
	b.settle(consume.DefaultMaxBytes, 1<<20) // the first read kept 1 MiB
	b.settle(2<<20, 0)                       // the second found nothing
	if got := b.inUse(); got != 1<<20 {
		t.Fatalf("in use %d after the reads settled, want 1 MiB", got)
	}
	b.release(1 << 20)
	b.settle(b.grant(consume.DefaultMaxBytes), 10<<20-minAnswerGrant+1) // a read kept all but less than a message
	if g := b.grant(consume.DefaultMaxBytes); g != 0 {
		t.Fatalf("granted %d, less than the largest message", g)
	}
	if g := b.grant(100); g != 100 {
		t.Fatalf("a small want that fits was granted %d", g)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("releasing more than was taken did not panic")
		}
	}()
	b.release(11 << 20)
}

// A node's consume and replay answers hold its answer budget until the caller releases
// them; a read that finds it spent is refused with ErrBusy and leases nothing; a parked
// long-poll holds nothing.
func TestConsumeAnswersHoldTheNodesBudgetUntilReleased(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.MaxInflightAnswerBytes = 3 << 20 })
	top := n.createTopic(service.CreateTopicRequest{Name: "big", Partitions: 3})
	mib := strings.Repeat("m", 1<<20)
	for range 4 {
		n.mustCommit(top, 0, mib)
	}
	first, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1000})
	if err != nil || len(first) != 3 {
		t.Fatalf("consume = %d messages, %v; want the 3 MiB the budget holds", len(first), err)
	}
	if got := n.e.answers.inUse(); got != 3<<20 {
		t.Fatalf("answer budget in use %d, want 3 MiB", got)
	}
	if _, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1}); !errors.Is(err, errcode.ErrBusy) {
		t.Fatalf("consume with the budget spent: %v, want ErrBusy", err)
	}
	if _, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: 0, Max: 1}); !errors.Is(err, errcode.ErrBusy) {
		t.Fatalf("replay with the budget spent: %v, want ErrBusy", err)
	}
	n.e.ReleaseAnswer(first)
	if got := n.e.answers.inUse(); got != 0 {
		t.Fatalf("answer budget in use %d after the release", got)
	}
	// The refused consume leased nothing: the fourth message is next.
	rest, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1})
	if err != nil || len(rest) != 1 || rest[0].Offset != 3 {
		t.Fatalf("consume after the release = %+v, %v; want offset 3", rest, err)
	}
	replayed, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: 0, Max: 10})
	if err != nil || len(replayed) != 2 || n.e.answers.inUse() != 3<<20 {
		t.Fatalf("replay beside a 1 MiB answer = %d messages, %v, %d in use; want the 2 that fit, 3 MiB", len(replayed), err, n.e.answers.inUse())
	}
	n.e.ReleaseAnswer(rest)
	n.e.ReleaseAnswer(replayed)

	// A long-poll waits holding nothing, and holds its message once it has it.
	done := make(chan []service.Message, 1)
	go func() {
		msgs, _ := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: 10 * time.Second})
		done <- msgs
	}()
	time.Sleep(50 * time.Millisecond)
	if got := n.e.answers.inUse(); got != 0 {
		t.Fatalf("a parked long-poll holds %d bytes", got)
	}
	n.mustCommit(top, 0, "late")
	var got []service.Message
	testwait.For(t, 10*time.Second, "the long-poll answered", func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	})
	if len(got) != 1 || string(got[0].Payload) != "late" || n.e.answers.inUse() != 4 {
		t.Fatalf("long-poll = %+v, %d in use; want the late message holding 4 bytes", got, n.e.answers.inUse())
	}
	n.e.ReleaseAnswer(got)
}

// A pinned consume forwarded to the owner holds the owner's answer here (without telling the
// owner a grant: it may park there for its whole wait); a queue probe tells the owner its
// grant as bytes taken.
func TestForwardedConsumesTellTheOwnerTheirGrant(t *testing.T) {
	fp := &fakePeers{}
	fp.onConsume = func(addr string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
		return []service.Message{{Topic: "routed", Partition: 1, Offset: 0, Payload: []byte("remote"), ReceiptHandle: "1:0:9"}}, nil
	}
	n, top := twoNodeTopic(t, fp)
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 1, Offset: -1, Max: 1})
	if err != nil || len(msgs) != 1 || n.e.answers.inUse() != 6 {
		t.Fatalf("pinned consume = %+v, %v, %d in use; want the owner's message holding 6 bytes", msgs, err, n.e.answers.inUse())
	}
	n.e.ReleaseAnswer(msgs)
	msgs, err = n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 2})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("queue consume = %+v, %v", msgs, err)
	}
	n.e.ReleaseAnswer(msgs)
	calls := fp.consumeCalls()
	if len(calls) != 2 {
		t.Fatalf("calls %+v, want a forward and a probe", calls)
	}
	if calls[0].req.Taken != 0 {
		t.Fatalf("forwarded pinned consume carrying %d bytes taken, want none", calls[0].req.Taken)
	}
	if want := consume.DefaultMaxBytes - 2*messageCeiling; calls[1].req.Taken != want {
		t.Fatalf("probe for max 2 carrying %d bytes taken, want %d", calls[1].req.Taken, want)
	}
	if got := n.e.answers.inUse(); got != 0 {
		t.Fatalf("%d bytes in use after every answer was released", got)
	}
}

// Requeue ends the leases of an answer that never reached its consumer: the messages are
// delivered again at once, not after their visibility timeout; replayed ones are skipped.
func TestRequeueDeliversAnUndeliveredAnswerAgainAtOnce(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "back", Partitions: 3})
	n.mustCommit(top, 0, "a", "b")
	first, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 10})
	if err != nil || len(first) != 2 {
		t.Fatalf("consume = %+v, %v", first, err)
	}
	if again, _ := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 10}); len(again) != 0 {
		t.Fatalf("leased messages delivered again before the requeue: %+v", again)
	}
	replayed, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: 0, Max: 10})
	if err != nil || len(replayed) != 2 {
		t.Fatalf("replay = %+v, %v", replayed, err)
	}
	n.e.Requeue(top, append(replayed, first...))
	again, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 10})
	if err != nil || len(again) != 2 || again[0].Offset != 0 || again[0].ReceiptHandle == first[0].ReceiptHandle {
		t.Fatalf("consume after the requeue = %+v, %v; want both messages under new leases", again, err)
	}
}

// A probe's grant is a share of what is free, never less than one message: probes in flight
// for small messages leave most of the budget to the node's own reads.
func TestProbeGrantsAreAShareOfTheFreeBudget(t *testing.T) {
	b := newAnswerBudget(64 << 20)
	if g := b.grantShare(consume.DefaultMaxBytes); g != 2<<20 {
		t.Fatalf("probe grant %d from 64 MiB free, want a 32nd: 2 MiB", g)
	}
	if g := b.grantShare(1000); g != 1000 {
		t.Fatalf("a small want was granted %d", g)
	}
	b = newAnswerBudget(64 << 20)
	b.settle(0, 64<<20-3<<20/2) // answers being written hold all but 1.5 MiB
	if g := b.grantShare(consume.DefaultMaxBytes); g != minAnswerGrant {
		t.Fatalf("probe grant %d with little free, want one message's room", g)
	}
	if g := b.grantShare(consume.DefaultMaxBytes); g != 0 {
		t.Fatalf("probe grant %d with less than a message free", g)
	}
}
