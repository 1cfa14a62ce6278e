package meta

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/errcode"
)

// ErrNotLeader is returned by leader-only operations (Barrier, LeaderRead*) on a node that is
// not the Raft leader; node RPC answers it with 421 and a leader hint.
var ErrNotLeader = errcode.ErrNotLeader

// caughtUpPoll is how often WaitCaughtUp re-evaluates AppliedCaughtUp.
const caughtUpPoll = 25 * time.Millisecond

// IsLeader reports whether this node is the Raft leader right now.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the current leader's server ID and Raft address ("" when unknown).
func (s *Store) Leader() (id, addr string) {
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// LastContact is when this node last heard from the Raft leader (zero when it never has;
// the leader's own is not kept current: ask IsLeader first).
func (s *Store) LastContact() time.Time { return s.raft.LastContact() }

// AppliedIndex is the index of the last log entry this node has applied: Raft's applied
// index (which counts no-op and configuration entries the FSM never sees) or the FSM's
// m/applied, whichever is larger (after a restart Raft starts from its last snapshot while
// the durable FSM is further ahead).
func (s *Store) AppliedIndex() uint64 { return max(s.raft.AppliedIndex(), s.fsm.applied()) }

// AppliedCaughtUp reports docs/internals/metastore.md §9: a leader is known; this node is the leader or
// heard from it within LeaderContactMax; and everything this node knows to be committed has
// been applied to the FSM (Raft's applied index ≥ commit index, with no batch still queued
// for or inside the FSM). The freshness clause is what catches a restarted replica whose
// local indexes agree with each other while hours stale.
//
// A leader also needs its commit index to have reached the entries of earlier terms in its
// log (leaderCommitted). Until a fresh leader commits an entry of its own term it does not
// know those are committed; its commit index is the one it restarted with, which its applied
// index already meets, while the entries after it are still to be applied (§5.2: election
// proves a leader's log complete, not its FSM). A restarted single node would otherwise read
// caught up while a topic created after its last snapshot is still missing.
func (s *Store) AppliedCaughtUp() bool {
	if s.closed.Load() {
		return false
	}
	if id, _ := s.Leader(); id == "" {
		return false
	}
	if s.raft.State() == raft.Leader {
		if !s.leaderCommitted() {
			return false
		}
	} else if time.Since(s.raft.LastContact()) > s.contactMax {
		return false
	}
	commit := s.raft.CommitIndex()
	if s.raft.AppliedIndex() < commit {
		return false
	}
	if s.fsm.lastSeen.Load() >= commit && !s.fsm.applying.Load() {
		return true
	}
	// The tail may be no-op/configuration entries the FSM never sees: ask Raft whether
	// anything is still queued for the FSM goroutine.
	stats := s.raft.Stats()
	pending, err := strconv.ParseUint(stats["fsm_pending"], 10, 64)
	return err == nil && pending == 0 && !s.fsm.applying.Load()
}

// termFloor is the last log index a node saw while leading term: every entry of an earlier
// term in its log is at or below it.
type termFloor struct{ term, index uint64 }

// leaderCommitted reports whether this leader's commit index covers every entry of an earlier
// term in its log. The floor is the log's last index at the first check of the current term;
// sampled at any moment of the term (or of the candidacy that won it) it is at or above the
// last entry of an earlier term, since a leader's log holds every one of them from the start
// and only appends its own after. The leader commits them with the first entry of its term.
func (s *Store) leaderCommitted() bool {
	term := s.raft.CurrentTerm()
	s.floorMu.Lock()
	if s.floor.term != term {
		s.floor = termFloor{term: term, index: s.raft.LastIndex()}
	}
	floor := s.floor.index
	s.floorMu.Unlock()
	return s.raft.CommitIndex() >= floor
}

// WaitCaughtUp blocks until AppliedCaughtUp holds or ctx ends (ctx's error, wrapped with
// ErrTimeout) or the store closes (ErrClosed).
func (s *Store) WaitCaughtUp(ctx context.Context) error {
	t := time.NewTicker(caughtUpPoll)
	defer t.Stop()
	for {
		if s.closed.Load() {
			return ErrClosed
		}
		if s.AppliedCaughtUp() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the metastore to catch up: %w", ErrTimeout, ctx.Err())
		case <-s.stop:
			return ErrClosed
		case <-t.C:
		}
	}
}

// Barrier blocks until this node's FSM has applied every entry committed before the call
// (docs/internals/metastore.md §9). Leader only: a follower gets ErrNotLeader. Bounded by
// BarrierTimeout and ctx.
func (s *Store) Barrier(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	timeout := BarrierTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	f := s.raft.Barrier(timeout)
	if err := waitFuture(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return fmt.Errorf("%w: barrier: %w", ErrNotLeader, err)
		}
		return fmt.Errorf("barrier: %w", err)
	}
	return nil
}

// waitFuture waits for f or ctx. A ctx end returns ErrTimeout wrapping ctx's error (the
// operation may still complete); a raft failure is wrapped with ErrNoLeader.
func waitFuture(ctx context.Context, f raft.Future) error {
	if ctx.Done() != nil {
		done := make(chan struct{})
		go func() {
			_ = f.Error()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		}
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	return nil
}

// LeadershipChanges subscribes to this node's leadership transitions: the channel first
// carries the current state, then true on gaining and false on losing leadership. Only the
// latest value is kept when the receiver lags (hashicorp LeaderCh semantics); callers that
// must not miss a loss also re-check IsLeader periodically. cancel unsubscribes; the channel
// is never closed.
func (s *Store) LeadershipChanges() (ch <-chan bool, cancel func()) {
	c := make(chan bool, 1)
	s.leaderMu.Lock()
	s.leaderSubs[c] = struct{}{}
	c <- s.IsLeader()
	s.leaderMu.Unlock()
	return c, func() {
		s.leaderMu.Lock()
		delete(s.leaderSubs, c)
		s.leaderMu.Unlock()
	}
}

// watchLeadership is the only reader of raft.LeaderCh; it fans transitions out to
// subscribers, and wakes LeaderChange waiters on those and on the leader observations obs,
// until Close.
func (s *Store) watchLeadership(obs <-chan raft.Observation, deregister func()) {
	defer close(s.watchDone)
	defer deregister()
	for {
		select {
		case <-s.stop:
			return
		case <-obs:
			s.leaders.notify()
		case v := <-s.raft.LeaderCh():
			s.leaders.notify()
			if v {
				s.logger.Info("gained raft leadership")
			} else {
				s.logger.Info("lost raft leadership")
			}
			s.leaderMu.Lock()
			for c := range s.leaderSubs {
				select { // latest value wins
				case <-c:
				default:
				}
				c <- v
			}
			s.leaderMu.Unlock()
		}
	}
}
