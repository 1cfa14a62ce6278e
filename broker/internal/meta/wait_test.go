package meta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// waitResult runs WaitApplied(ctx, idx) on its own goroutine.
func waitResult(ctx context.Context, s *Store, idx uint64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.WaitApplied(ctx, idx) }()
	return done
}

// stillWaiting fails the test if done has an answer within a short while.
func stillWaiting(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("WaitApplied returned %v before its index was applied", err)
	case <-time.After(50 * time.Millisecond):
	}
}

func answer(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("WaitApplied did not return")
		return nil
	}
}

func TestWaitAppliedReturnsAtOnceWhenAlreadyApplied(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a wait would end with ctx's error
	for _, idx := range []uint64{0, 1, s.AppliedIndex()} {
		if err := s.WaitApplied(ctx, idx); err != nil {
			t.Fatalf("WaitApplied(%d) with applied %d = %v", idx, s.AppliedIndex(), err)
		}
	}
}

func TestWaitAppliedWakesOnApply(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	done := waitResult(ctxT(t), s, s.AppliedIndex()+1)
	stillWaiting(t, done)
	if err := s.CreateTopic(ctxT(t), newTopic("orders", 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := answer(t, done); err != nil {
		t.Fatalf("WaitApplied after the apply = %v", err)
	}
}

func TestWaitAppliedEndsWithCtx(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitApplied(ctx, s.AppliedIndex()+100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitApplied past ctx = %v, want context.DeadlineExceeded", err)
	}
}

func TestWaitAppliedEndsOnClose(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	done := waitResult(ctxT(t), s, s.AppliedIndex()+100)
	stillWaiting(t, done)
	_ = s.Close()
	if err := answer(t, done); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitApplied across Close = %v, want ErrClosed", err)
	}
}

func TestWaitAppliedWakesOnSnapshotRestore(t *testing.T) {
	src := populated(t)
	data := snapshotOf(t, src.f)
	s := openSingle(t, t.TempDir(), nil)
	if s.AppliedIndex() >= src.f.applied() {
		t.Fatalf("fresh store applied %d, snapshot %d: nothing to wait for", s.AppliedIndex(), src.f.applied())
	}
	done := waitResult(ctxT(t), s, src.f.applied())
	stillWaiting(t, done)
	// Raft hands a snapshot to the FSM this way when a follower is too far behind.
	if err := s.fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if err := answer(t, done); err != nil {
		t.Fatalf("WaitApplied after the restore = %v", err)
	}
}

func TestNextApplyClosesAfterTheChangeIsReadable(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	next := s.NextApply()
	if _, ok := s.Topic("orders"); ok {
		t.Fatal("orders exists before its create")
	}
	go func() { _ = s.CreateTopic(context.Background(), newTopic("orders", 1), nil) }()
	select {
	case <-next:
	case <-time.After(5 * time.Second):
		t.Fatal("NextApply not closed by an apply")
	}
	if _, ok := s.Topic("orders"); !ok {
		t.Fatal("NextApply closed before the applied topic was readable")
	}
}

func TestSignalNotifyWakesEveryWaiterOnce(t *testing.T) {
	var s signal
	s.notify() // nobody waits: nothing to close, nothing allocated
	if s.ch.Load() != nil {
		t.Fatal("notify without waiters left a channel")
	}
	a, b := s.wait(), s.wait()
	if a != b {
		t.Fatal("two waiters before a notify got different channels")
	}
	s.notify()
	for _, c := range []<-chan struct{}{a, b} {
		select {
		case <-c:
		default:
			t.Fatal("notify left a waiter asleep")
		}
	}
	select {
	case <-s.wait():
		t.Fatal("a wait after the notify is already woken")
	default:
	}
	if n := testing.AllocsPerRun(100, s.notify); n != 0 {
		t.Fatalf("notify allocates %v times per call", n)
	}
}

func TestLeaderChangeClosesWhenLeadershipMoves(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"})
	a, ctx := c.stores["a"], ctxT(t)
	changed := c.stores["c"].LeaderChange()
	if id, _ := c.stores["c"].Leader(); id != "a" {
		t.Fatalf("c sees leader %q, want a", id)
	}
	if err := a.TransferLeadership(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("LeaderChange not closed on a follower when leadership moved")
	}
}
