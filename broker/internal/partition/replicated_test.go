package partition

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/wal"
)

// A follower's log opens and stays open while this node is a replica, and closes when it is
// not even that.
func TestAFollowersLogOpensAndStaysWhileItIsAReplica(t *testing.T) {
	var replicates atomic.Bool
	replicates.Store(true)
	f := newFixture(t, func(d *Deps) {
		d.Owns = func(string, int) bool { return false }
		d.Replicates = func(string, int) bool { return replicates.Load() }
	})
	pt, err := f.r.Get(f.topic, 0)
	if err != nil {
		t.Fatalf("open as a follower: %v", err)
	}
	if pt.Epochs() == nil {
		t.Fatal("no leader-epoch file")
	}
	if _, err := f.r.Commit(f.topic, 0, []wal.Record{{Payload: []byte("x")}}); !errors.Is(err, errcode.ErrNotOwner) {
		t.Fatalf("commit on a follower: %v", err)
	}
	f.r.CloseLost()
	if f.r.Peek("t", 0) != pt {
		t.Fatal("a follower's log was closed as lost")
	}
	replicates.Store(false)
	f.r.CloseLost()
	if f.r.Peek("t", 0) != nil {
		t.Fatal("a log of a partition this node no longer replicates stayed open")
	}
}

// leaderFixture is a fixture owning a replicated partition 0 led by "a" with the given ISR.
func leaderFixture(t testing.TB, isr []string, minISR int) (*fixture, *replica.Leader) {
	t.Helper()
	var ld atomic.Pointer[replica.Leader]
	f := newFixture(t, func(d *Deps) {
		d.Leader = func(string, int) (*replica.Leader, bool) {
			l := ld.Load()
			return l, l != nil
		}
	})
	pt, err := f.r.Get(f.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := replica.NewLeader(replica.LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b", "c"},
		ISR: isr, MinISR: minISR, Log: pt.Log()})
	if err != nil {
		t.Fatal(err)
	}
	ld.Store(l)
	return f, l
}

func TestCommitReplicatedReturnsOnceTheISRHoldsTheBatch(t *testing.T) {
	f, ld := leaderFixture(t, []string{"a", "b"}, 2)
	recs := []wal.Record{{Payload: []byte("one")}, {Payload: []byte("two")}}
	done := make(chan error, 1)
	go func() {
		first, err := f.r.CommitReplicated(context.Background(), f.topic, 0, recs)
		if err == nil && first != 0 {
			err = errors.New("first offset not 0")
		}
		done <- err
	}()
	pt := f.r.Peek("t", 0)
	deadline := time.Now().Add(5 * time.Second)
	for pt.Log().NextOffset() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("nothing appended")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("committed before the follower held the batch: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if pt.Log().HighWatermark() != 0 {
		t.Fatal("records visible before the ISR held them")
	}
	if err := ld.Fetched("b", 1, 2); err != nil { // b reports it holds [0, 2)
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pt.Log().HighWatermark() != 2 {
		t.Fatalf("hwm %d after the commit", pt.Log().HighWatermark())
	}
}

func TestCommitReplicatedRefusesBelowMinISRWithNothingAppended(t *testing.T) {
	f, ld := leaderFixture(t, []string{"a"}, 2)
	_, err := f.r.CommitReplicated(context.Background(), f.topic, 0, []wal.Record{{Payload: []byte("x")}})
	if !errors.Is(err, errcode.ErrNotEnoughReplicas) || errcode.HTTPStatus(err) != 503 {
		t.Fatalf("commit with 1 of 2 in sync: %v", err)
	}
	if n := f.r.Peek("t", 0).Log().NextOffset(); n != 0 {
		t.Fatalf("a refused commit appended %d records", n)
	}
	// A leadership that ends during the wait fails the commit: outcome unknown.
	if err := ld.SetISR(1, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.r.CommitReplicated(context.Background(), f.topic, 0, []wal.Record{{Payload: []byte("y")}})
		done <- err
	}()
	for f.r.Peek("t", 0).Log().NextOffset() != 1 {
		time.Sleep(time.Millisecond)
	}
	ld.Depose()
	if err := <-done; !errors.Is(err, replica.ErrDeposed) {
		t.Fatalf("commit whose leader was deposed: %v", err)
	}
}

func TestCommitReplicatedWithoutALeadershipIsRetryable(t *testing.T) {
	f := newFixture(t)
	_, err := f.r.CommitReplicated(context.Background(), f.topic, 0, []wal.Record{{Payload: []byte("x")}})
	if !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("commit before the leadership is taken up: %v", err)
	}
}

// A replicated commit tells peers' long-polls about its records only when no long-poll of the
// topic was parked here as it appended (as Commit does): a parked one is woken by the HWM
// advance and takes them, and waking peers as well costs each a probe that finds nothing.
func TestCommitReplicatedNotifiesPeersOnlyWithoutALocalTaker(t *testing.T) {
	for _, parked := range []bool{false, true} {
		f, _, _, notified := takerFixture(t, []string{"a"}, 1, func() bool { return parked })
		if _, err := f.r.CommitReplicated(context.Background(), f.topic, 0, []wal.Record{{Payload: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		if len(*notified) != 1 || (*notified)[0] != parked {
			t.Fatalf("with a long-poll parked %v: notify calls (taken) %v, want [%v]", parked, *notified, parked)
		}
	}
}

// takerFixture is a fixture leading replicated partition 0 (replicas a and b) whose local
// taker is taker; notified collects the taken flag of every Notify call.
func takerFixture(t *testing.T, isr []string, minISR int, taker func() bool) (*fixture, *Partition, *replica.Leader, *[]bool) {
	t.Helper()
	notified := new([]bool)
	var ld atomic.Pointer[replica.Leader]
	f := newFixture(t, func(d *Deps) {
		d.Leader = func(string, int) (*replica.Leader, bool) {
			l := ld.Load()
			return l, l != nil
		}
		d.Taker = func(string) bool { return taker() }
		d.Notify = func(_ string, _ int, taken bool) { *notified = append(*notified, taken) }
	})
	pt, err := f.r.Get(f.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := replica.NewLeader(replica.LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b"},
		ISR: isr, MinISR: minISR, Log: pt.Log()})
	if err != nil {
		t.Fatal(err)
	}
	ld.Store(l)
	return f, pt, l, notified
}

// A long-poll of the topic that starts here while the commit waits for its ISR takes the
// records when the HWM passes them, as one parked at the append would: peers are not told.
// Without the second look at the taker every commit that found no long-poll at its append
// woke a peer's long-poll, whose probe then mostly found the records taken.
func TestCommitReplicatedCountsALocalTakerThatCameDuringTheWait(t *testing.T) {
	var taker atomic.Bool
	f, pt, l, notified := takerFixture(t, []string{"a", "b"}, 2, taker.Load)
	done := make(chan error, 1)
	go func() {
		_, err := f.r.CommitReplicated(context.Background(), f.topic, 0, []wal.Record{{Payload: []byte("x")}})
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for pt.Log().NextOffset() != 1 { // appended, not yet committed: the taker was read
		if time.Now().After(deadline) {
			t.Fatal("nothing appended")
		}
		time.Sleep(time.Millisecond)
	}
	taker.Store(true) // a long-poll of the topic starts here
	if err := l.Fetched("b", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(*notified) != 1 || !(*notified)[0] {
		t.Fatalf("notify calls (taken) %v, want [true]: a long-poll here takes the records", *notified)
	}
}
