package meta

import (
	"context"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// signal is a broadcast of "something changed": wait returns a channel that the next notify
// closes. Waiters take the channel *before* checking the state they wait for, so a change
// between the check and the wait is never missed.
//
// Invariant: the channel exists only while somebody waits. notify with no waiter is one
// atomic load and allocates nothing, so the FSM can notify on every apply.
type signal struct {
	ch atomic.Pointer[chan struct{}]
}

// wait returns the channel the next notify closes.
func (s *signal) wait() <-chan struct{} {
	for {
		if p := s.ch.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if s.ch.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// notify wakes every current waiter. The state change it announces must be stored before the
// call (the waiter's re-check after wait then sees it).
func (s *signal) notify() {
	if s.ch.Load() == nil {
		return
	}
	if p := s.ch.Swap(nil); p != nil {
		close(*p)
	}
}

// WaitApplied blocks until AppliedIndex reaches idx: nil at once when it already has, ctx's
// error when ctx ends first, ErrClosed when the store closes. It wakes when the FSM applies
// an entry or restores a snapshot, so an idx that only a Raft no-op or configuration entry
// reaches (the FSM never sees those) is noticed at the FSM's next apply.
func (s *Store) WaitApplied(ctx context.Context, idx uint64) error {
	if s.AppliedIndex() >= idx {
		return nil
	}
	for {
		next := s.fsm.applies.wait()
		if s.AppliedIndex() >= idx {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return ErrClosed
		}
	}
}

// NextApply returns a channel closed when the FSM next applies an entry or restores a
// snapshot, after the change is readable (local reads and the domain versions see it). Take
// it before reading the state you wait on, then wait on it and read again.
func (s *Store) NextApply() <-chan struct{} { return s.fsm.applies.wait() }

// LeaderChange returns a channel closed when the known Raft leader changes (this node
// gaining or losing leadership included). Take it before reading Leader or IsLeader, then
// wait on it and read again.
func (s *Store) LeaderChange() <-chan struct{} { return s.leaders.wait() }

// leaderObservations registers a Raft observer for leader changes; watchLeadership turns its
// observations into leaders.notify. The observer never blocks Raft: with one observation
// pending the next is dropped, which loses nothing since a waiter re-reads the leader after
// any wake-up.
func (s *Store) leaderObservations() (<-chan raft.Observation, func()) {
	ch := make(chan raft.Observation, 1)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.RegisterObserver(obs)
	return ch, func() { s.raft.DeregisterObserver(obs) }
}
