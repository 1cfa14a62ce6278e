package engine

import (
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/transfer"
)

// pinned is a pinned queue consume of partition p.
func pinned(p int, wait time.Duration, max int) service.ConsumeRequest {
	return service.ConsumeRequest{Partition: p, Offset: -1, Wait: wait, Max: max}
}

func (n *testNode) consume(t meta.Topic, req service.ConsumeRequest) []service.Message {
	n.t.Helper()
	msgs, err := n.e.Consume(n.ctx(), t, req)
	if err != nil {
		n.t.Fatalf("consume %s: %v", t.Name, err)
	}
	return msgs
}

func (n *testNode) arm(t meta.Topic, p int, ttl time.Duration) transfer.Listing {
	n.t.Helper()
	l, err := n.e.PrepareHandoff(n.ctx(), t.Name, p, transfer.PrepareRequest{TTL: ttl})
	if err != nil {
		n.t.Fatalf("arm %s/%d: %v", t.Name, p, err)
	}
	if len(l.Token) != 32 {
		n.t.Fatalf("arm token %q is not 16 random bytes in hex", l.Token)
	}
	return l
}

func (n *testNode) frozen(t meta.Topic, p int) bool {
	pt := n.e.parts.Peek(t.Name, p)
	return pt != nil && pt.Frozen()
}

func (n *testNode) shardFrozen(t meta.Topic, p int) bool {
	pt := n.e.parts.Peek(t.Name, p)
	if pt == nil {
		return false
	}
	s := pt.Shard()
	return s != nil && s.State().Frozen
}

// MV-5: while frozen a commit is refused with nothing appended; acks, extends and nacks of
// leases already out work; the frozen partition reserves nothing; others serve.
func TestFrozenPartitionRefusesCommitsAndNewLeasesButSettlesOldOnes(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "frz", Partitions: 3})
	n.mustCommit(top, 0, "a", "b", "c")
	n.mustCommit(top, 1, "x")
	leases := n.consume(top, pinned(0, 0, 2))
	if len(leases) != 2 {
		t.Fatalf("reserved %d, want 2", len(leases))
	}
	l := n.arm(top, 0, 0)
	if l.HighWatermark != 3 || l.CommittedOffset != -1 {
		t.Fatalf("arm listing hwm %d committed %d, want 3 and -1", l.HighWatermark, l.CommittedOffset)
	}
	next := n.e.parts.Peek(top.Name, 0).Log().NextOffset()
	_, err := n.commit(top, 0, "refused")
	if !errors.Is(err, ErrFrozen) || !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("commit to a frozen partition: %v, want ErrFrozen wrapping errcode.ErrUnavailable", err)
	}
	if got := n.e.parts.Peek(top.Name, 0).Log().NextOffset(); got != next {
		t.Fatalf("refused commit appended: next_offset %d → %d", next, got)
	}
	errs := n.e.AckLocal(top, []service.AckEntry{ackEntry(t, leases[0], service.OpExtend), ackEntry(t, leases[1], service.OpNack)})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("extend/nack while frozen: %v", errs)
	}
	if got := n.consume(top, pinned(0, 0, 3)); len(got) != 0 {
		t.Fatalf("frozen partition handed out %d messages (c and the nacked b were reservable)", len(got))
	}
	if errs := n.e.AckLocal(top, []service.AckEntry{ackEntry(t, leases[0], service.OpAck)}); errs[0] != nil {
		t.Fatalf("ack while frozen: %v", errs[0])
	}
	if got := n.consume(top, pinned(1, 0, 1)); len(got) != 1 || string(got[0].Payload) != "x" {
		t.Fatalf("the other partition served %v, want x", got)
	}
	if _, err := n.commit(top, 1, "y"); err != nil {
		t.Fatalf("commit to an unfrozen partition: %v", err)
	}
}

// MV-6: a commit that passed the fast gate before the freeze armed is refused once it holds
// the produce lock; the listing's HWM excludes it.
func TestCommitPastTheFastGateIsRefusedUnderTheLockOnceFrozen(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "gate", Partitions: 3})
	n.mustCommit(top, 0, "before")
	pt := n.e.parts.Peek(top.Name, 0)

	pt.LockCommits()
	committed := make(chan error, 1)
	go func() { _, err := n.commit(top, 0, "late"); committed <- err }()
	waitGoroutine(t, "sync.Mutex.Lock", "narad.dev/broker/internal/partition.(*Registry).appendGrouped")
	armed := make(chan transfer.Listing, 1)
	go func() { armed <- n.arm(top, 0, 0) }()
	waitGoroutine(t, "sync.Mutex.Lock", "narad.dev/broker/internal/partition.(*Partition).LockCommits")
	pt.UnlockCommits()

	if err := <-committed; !errors.Is(err, ErrFrozen) {
		t.Fatalf("commit that reached the lock after the arm: %v, want ErrFrozen", err)
	}
	if l := <-armed; l.HighWatermark != 1 {
		t.Fatalf("listing hwm %d, want 1 (the refused commit excluded)", l.HighWatermark)
	}
	if got := pt.Log().NextOffset(); got != 1 {
		t.Fatalf("next_offset %d: the refused commit appended", got)
	}
}

// MV-7: a commit holding the produce lock when the arm arrives finishes first and is in the
// listing.
func TestHandoffListingIncludesACommitInFlightUnderTheLock(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "inflight", Partitions: 3})
	n.mustCommit(top, 0, "before")

	n.e.floorMu.Lock() // parks the next commit inside the produce lock, past its gates
	committed := make(chan error, 1)
	go func() { _, err := n.commit(top, 0, "mid-commit"); committed <- err }()
	waitGoroutine(t, "sync.Mutex.Lock", "narad.dev/broker/internal/engine.(*Engine).raiseFloor")
	armed := make(chan transfer.Listing, 1)
	go func() { armed <- n.arm(top, 0, 0) }()
	waitGoroutine(t, "sync.Mutex.Lock", "narad.dev/broker/internal/partition.(*Partition).LockCommits")
	n.e.floorMu.Unlock()

	if err := <-committed; err != nil {
		t.Fatalf("the in-flight commit failed: %v", err)
	}
	l := <-armed
	if l.HighWatermark != 2 {
		t.Fatalf("listing hwm %d, want 2 (the in-flight commit included)", l.HighWatermark)
	}
	var listed int64
	for _, s := range l.Segments {
		listed += s.Size
	}
	if pt := n.e.parts.Peek(top.Name, 0); listed != fileSizeOf(t, pt.Dir(), 0) {
		t.Fatalf("listed %d bytes, the segment holds %d", listed, fileSizeOf(t, pt.Dir(), 0))
	}
}

// MV-8: the arm waits for leases already out: an ack landing during the wait is in the
// frontier; a lease never acked is left out after the drain bound.
func TestArmDrainsLeasesBeforeReadingTheFrontier(t *testing.T) {
	t.Run("ack during the drain is in the frontier", func(t *testing.T) {
		n := startNode(t, t.TempDir(), nil)
		top := n.createTopic(service.CreateTopicRequest{Name: "drain", Partitions: 3})
		n.mustCommit(top, 0, "a", "b")
		lease := n.consume(top, pinned(0, 0, 1))
		armed := make(chan transfer.Listing, 1)
		go func() { armed <- n.arm(top, 0, 0) }()
		eventually(t, 5*time.Second, func() bool { return n.shardFrozen(top, 0) }, "freeze armed")
		if errs := n.e.AckLocal(top, []service.AckEntry{ackEntry(t, lease[0], service.OpAck)}); errs[0] != nil {
			t.Fatalf("ack during the drain: %v", errs[0])
		}
		if l := <-armed; l.CommittedOffset != 0 || !l.HasCommitted {
			t.Fatalf("frontier %d has_committed=%v, want 0 (the ack that landed during the drain)", l.CommittedOffset, l.HasCommitted)
		}
	})
	t.Run("a lease never acked is left out after the bound", func(t *testing.T) {
		n := startNode(t, t.TempDir(), nil)
		top := n.createTopic(service.CreateTopicRequest{Name: "drain", Partitions: 3})
		n.mustCommit(top, 0, "a", "b")
		n.consume(top, pinned(0, 0, 1))
		start := time.Now()
		l := n.arm(top, 0, 0)
		took := time.Since(start)
		if took < transfer.LeaseDrainBound || took > 5*time.Second {
			t.Fatalf("arm took %s, want the drain bound %s", took, transfer.LeaseDrainBound)
		}
		if l.CommittedOffset != -1 {
			t.Fatalf("frontier %d, want -1 (the lease is still out)", l.CommittedOffset)
		}
		if st := shardOf(t, n, top, 0).State(); st.InFlight != 1 || !st.Frozen {
			t.Fatalf("shard %+v, want the lease still out under a frozen shard", st)
		}
	})
}

// MV-11 and the token rules: a fence with a drifted HWM is refused without renewing the TTL; a
// token names only its own freeze and never creates one.
func TestFenceAndReArmAcceptOnlyTheActiveToken(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "fence", Partitions: 3})
	n.mustCommit(top, 0, "a")
	prepare := func(req transfer.PrepareRequest) (transfer.Listing, error) {
		return n.e.PrepareHandoff(n.ctx(), top.Name, 0, req)
	}
	if _, err := prepare(transfer.PrepareRequest{Token: "00112233445566778899aabbccddeeff"}); !errors.Is(err, transfer.ErrUnknownToken) {
		t.Fatalf("re-arm before any arm: %v, want ErrUnknownToken", err)
	}
	if n.frozen(top, 0) {
		t.Fatal("a token created a freeze")
	}
	if _, err := n.commit(top, 0, "b"); err != nil {
		t.Fatalf("commit after a refused re-arm: %v", err)
	}

	first := n.arm(top, 0, time.Minute)
	second := n.arm(top, 0, time.Minute) // a new arm replaces the token
	if _, err := prepare(transfer.PrepareRequest{Token: first.Token}); !errors.Is(err, transfer.ErrUnknownToken) {
		t.Fatalf("re-arm with a replaced token: %v, want ErrUnknownToken", err)
	}
	pt := n.e.parts.Peek(top.Name, 0)
	deadline := func() time.Time { d, _ := pt.FreezeState(); return d }
	before := deadline()
	_, err := prepare(transfer.PrepareRequest{Token: second.Token, Fence: true, ExpectHWM: second.HighWatermark + 1})
	if !errors.Is(err, transfer.ErrHWMMismatch) || !transfer.FenceRefused(err) {
		t.Fatalf("fence with a drifted hwm: %v, want ErrHWMMismatch", err)
	}
	if !deadline().Equal(before) {
		t.Fatal("a refused fence renewed the TTL")
	}
	l, err := prepare(transfer.PrepareRequest{Token: second.Token, Fence: true, ExpectHWM: second.HighWatermark, TTL: 2 * time.Minute})
	if err != nil || l.Token != second.Token || l.HighWatermark != 2 || l.ExpiresInMs != (2*time.Minute).Milliseconds() {
		t.Fatalf("fence: %+v, %v", l, err)
	}
	if !deadline().After(before) {
		t.Fatal("a successful fence did not renew the TTL")
	}
	if l, err := prepare(transfer.PrepareRequest{Token: second.Token}); err != nil || l.HighWatermark != 2 {
		t.Fatalf("re-arm: %+v, %v", l, err)
	}
}

// The freeze lapses on its own at its deadline: reservations resume (a long-poll parked on the
// frozen partition wakes), commits land, the token answers freeze_lapsed, and the frozen
// period is observed.
func TestFreezeLapsesAfterItsTTLAndReservationsResume(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "lapse", Partitions: 3})
	n.mustCommit(top, 0, "a")
	const ttl = 600 * time.Millisecond
	l := n.arm(top, 0, ttl) // no shard yet: the long-poll below creates it frozen
	armedAt := time.Now()
	got := make(chan []service.Message, 1)
	go func() { got <- n.consume(top, pinned(0, 10*time.Second, 1)) }()
	eventually(t, 5*time.Second, func() bool { return n.shardFrozen(top, 0) }, "shard created frozen")

	msgs := <-got
	if len(msgs) != 1 || string(msgs[0].Payload) != "a" {
		t.Fatalf("long-poll got %v after the lapse, want a", msgs)
	}
	if waited := time.Since(armedAt); waited < ttl-50*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("long-poll returned %s after the arm; want it held until the %s lapse, then woken", waited, ttl)
	}
	if _, err := n.e.PrepareHandoff(n.ctx(), top.Name, 0, transfer.PrepareRequest{Token: l.Token}); !errors.Is(err, transfer.ErrFreezeLapsed) {
		t.Fatalf("re-arm after the lapse: %v, want ErrFreezeLapsed", err)
	}
	if n.frozen(top, 0) {
		t.Fatal("a re-arm of a lapsed freeze revived it")
	}
	if _, err := n.commit(top, 0, "b"); err != nil {
		t.Fatalf("commit after the lapse: %v", err)
	}
	if c := histCount(t, n, "narad_moves_freeze_seconds"); c != 1 {
		t.Fatalf("narad_moves_freeze_seconds count %d, want 1", c)
	}
}

// Re-arming every quarter of the TTL keeps the freeze from lapsing (MV-9 at unit scale).
func TestReArmKeepsTheFreezePastItsTTL(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "rearm", Partitions: 3})
	const ttl = 400 * time.Millisecond
	l := n.arm(top, 0, ttl)
	pace := time.NewTicker(ttl / 4) // the destination's re-arm cadence
	defer pace.Stop()
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); <-pace.C {
		r, err := n.e.PrepareHandoff(n.ctx(), top.Name, 0, transfer.PrepareRequest{Token: l.Token, TTL: ttl})
		if err != nil {
			t.Fatalf("re-arm: %v", err)
		}
		if _, err := n.commit(top, 0, "x"); !errors.Is(err, ErrFrozen) {
			t.Fatalf("commit while re-armed: %v, want ErrFrozen", err)
		}
		if r.ExpiresInMs != ttl.Milliseconds() {
			t.Fatalf("re-arm expires_in %d, want %d", r.ExpiresInMs, ttl.Milliseconds())
		}
	}
	eventually(t, 5*time.Second, func() bool { return !n.frozen(top, 0) }, "lapse once re-arms stop")
}

// Ownership loss (the flip applied here) closes the partition: log and shard close, leases
// are stale, the freeze ends and the token is no longer honoured.
func TestOwnershipLossEndsTheFreezeAndClosesThePartition(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "127.0.0.1:4",
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "flip", Partitions: 3})
	if a, _ := n.store.Assignment(top.Name, 0); a.Owner != "n1" {
		t.Fatalf("partition 0 placed on %q, want n1", a.Owner)
	}
	n.mustCommit(top, 0, "a", "b")
	lease := n.consume(top, pinned(0, 0, 1))
	h, _ := consume.ParseHandle(lease[0].ReceiptHandle)
	l := n.arm(top, 0, time.Minute)
	pt := n.e.parts.Peek(top.Name, 0)
	shard := shardOf(t, n, top, 0)

	ctx := n.ctx()
	if _, _, err := n.store.SetAssignmentTarget(ctx, top.Name, 0, "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.store.CompleteMove(ctx, top.Name, 0, "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	// The partition leaves the registry first and is closed (freeze ended) just after.
	eventually(t, 10*time.Second, func() bool {
		if n.e.parts.Peek(top.Name, 0) != nil {
			return false
		}
		_, ended := pt.FreezeState()
		return ended && pt.Closed()
	}, "partition out of the registry, closed and its freeze ended after the flip")
	if err := shard.Ack(h.Offset, h.Nonce, limitsOf(top)); !errors.Is(err, consume.ErrStale) {
		t.Fatalf("ack on the old shard: %v, want stale", err)
	}
	if _, err := n.e.PrepareHandoff(n.ctx(), top.Name, 0, transfer.PrepareRequest{Token: l.Token}); !errors.Is(err, errcode.ErrNotOwner) || !errors.Is(err, transfer.ErrNotOwner) {
		t.Fatalf("re-arm after the flip: %v, want not owner", err)
	}
	if c := histCount(t, n, "narad_moves_freeze_seconds"); c != 1 {
		t.Fatalf("narad_moves_freeze_seconds count %d, want 1", c)
	}
}

// A failed arm (fault before the produce lock) lifts the freeze it created.
func TestFailedArmLiftsItsFreeze(t *testing.T) {
	resetFaults(t)
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "armfail", Partitions: 3})
	n.mustCommit(top, 0, "a")
	setFault(t, FaultHandoffBeforeLock)
	_, err := n.e.PrepareHandoff(n.ctx(), top.Name, 0, transfer.PrepareRequest{})
	if !errors.Is(err, errcode.ErrUnavailable) || !errors.Is(err, transfer.ErrUnavailable) {
		t.Fatalf("arm with a fault before the lock: %v, want 503", err)
	}
	if n.frozen(top, 0) {
		t.Fatal("a failed arm left the partition frozen")
	}
	if _, err := n.commit(top, 0, "b"); err != nil {
		t.Fatalf("commit after a failed arm: %v", err)
	}
	setFault(t, FaultCommitAfterGate)
	if _, err := n.commit(top, 0, "c"); !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("commit with a fault after the gate: %v, want 503", err)
	}
}

// shardOf returns the open consume shard of (top, p).
func shardOf(t *testing.T, n *testNode, top meta.Topic, p int) *consume.Shard {
	t.Helper()
	pt := n.e.parts.Peek(top.Name, p)
	if pt == nil {
		t.Fatalf("%s/%d not open", top.Name, p)
	}
	s := pt.Shard()
	if s == nil {
		t.Fatalf("%s/%d has no shard", top.Name, p)
	}
	return s
}

// setFault arms a fault point to return faults.ErrInjected.
func setFault(t *testing.T, name string) {
	t.Helper()
	faults.Set(name, nil)
	t.Cleanup(func() { faults.Clear(name) })
}

func histCount(t *testing.T, n *testNode, family string) uint64 {
	t.Helper()
	fams, err := n.m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == family && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}
