package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Forwarding of proposals from followers to the leader ("metadata writes from any node are
// forwarded to the leader; without a quorum they answer 503").
//
// A follower encodes the command as usual and hands it to Config.Forwarder, which ships it
// to the leader (node RPC); the leader runs ApplyCommand and answers with the FSM's Result
// and the Raft index of the entry. The follower then waits until its own FSM has applied
// that index, so "when a proposal returns, this node's FSM has applied it" holds for
// forwarded proposals too.

// Forwarding constants.
const (
	leaderPoll        = 50 * time.Millisecond // how often a proposal looks for a leader again
	maxForwardRetries = 3                     // not-leader answers re-resolved before giving up
)

// Forwarder ships an encoded command to the leader and returns what the leader's
// ApplyCommand returned: the FSM Result and the Raft index of the applied entry. It is
// implemented by the node RPC layer; it runs on the proposer's goroutine and honours ctx.
//
// Contract: an error wrapping ErrNotLeader means the contacted node is not the leader and
// did not append the entry (the proposer re-resolves the leader and retries); ErrTimeout
// and ErrInvalid from the leader pass through; any other error (unreachable, 503,
// undecodable reply) means the outcome is unknown and the proposal fails with ErrNoLeader.
type Forwarder interface {
	Forward(ctx context.Context, leaderID, leaderAddr string, command []byte) (Result, uint64, error)
}

type leaderOnlyKey struct{}

// LeaderOnly returns a ctx whose proposals are never forwarded: on a node that is not the
// leader they fail (wrapping ErrNoLeader) instead of being applied by another node. Leader
// duties (the controller) use it so a deposed leader never acts through its successor.
func LeaderOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, leaderOnlyKey{}, true)
}

func isLeaderOnly(ctx context.Context) bool {
	v, _ := ctx.Value(leaderOnlyKey{}).(bool)
	return v
}

// ApplyCommand is the leader side of forwarding (node RPC): it decodes command (ErrInvalid
// if it does not decode), applies it through Raft on this node and returns the FSM's Result
// (not mapped to an error: the caller ships it back, and the proposer maps it with
// Result.Err) and the entry's Raft index. A node that is not the leader answers ErrNotLeader
// (nothing was appended; the proposer may retry elsewhere); other Raft failures wrap
// ErrNoLeader (outcome unknown); ctx or Config.ApplyTimeout ending first is ErrTimeout.
func (s *Store) ApplyCommand(ctx context.Context, command []byte) (Result, uint64, error) {
	if s.closed.Load() {
		return Result{}, 0, ErrClosed
	}
	if _, err := decodeCommand(command); err != nil {
		return Result{}, 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !s.IsLeader() {
		return Result{}, 0, ErrNotLeader
	}
	if err := ctx.Err(); err != nil {
		return Result{}, 0, fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	res, index, err := s.applyLocal(ctx, command)
	if err != nil {
		if notAppended(err) {
			return Result{}, 0, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return Result{}, 0, err
	}
	return res, index, nil
}

// submit applies an encoded command: through Raft when this node leads, else through the
// Forwarder (unless there is none or ctx is LeaderOnly). ctx is the caller's; the whole
// proposal is bounded by Config.ApplyTimeout.
func (s *Store) submit(outer context.Context, data []byte) (Result, error) {
	ctx, cancel := context.WithTimeout(outer, s.cfg.ApplyTimeout)
	defer cancel()
	if s.cfg.Forwarder == nil || isLeaderOnly(outer) {
		res, _, err := s.applyLocal(ctx, data)
		if err != nil {
			return Result{}, err
		}
		return res, res.Err()
	}
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > maxForwardRetries {
			return Result{}, fmt.Errorf("%w: leader kept changing: %v", ErrNoLeader, lastErr)
		}
		if attempt > 0 {
			if err := s.pause(ctx, leaderPoll); err != nil {
				return Result{}, fmt.Errorf("%w (last: %v)", err, lastErr)
			}
		}
		if s.IsLeader() {
			res, _, err := s.applyLocal(ctx, data)
			if err == nil {
				return res, res.Err()
			}
			if !notAppended(err) {
				return Result{}, err
			}
			lastErr = err // lost leadership before appending: forward instead
			continue
		}
		id, addr, err := s.awaitLeader(ctx)
		if err != nil {
			return Result{}, err
		}
		if id == s.cfg.NodeID {
			lastErr = errors.New("this node became the leader")
			continue
		}
		res, index, err := s.cfg.Forwarder.Forward(ctx, id, addr, data)
		if err == nil {
			s.awaitApplied(outer, index)
			return res, res.Err()
		}
		switch {
		case errors.Is(err, ErrNotLeader):
			lastErr = fmt.Errorf("forward to %s: %w", id, err)
			continue
		case errors.Is(err, ErrTimeout), errors.Is(err, ErrInvalid), errors.Is(err, ErrNoLeader):
			return Result{}, fmt.Errorf("forward to leader %s: %w", id, err)
		case ctx.Err() != nil:
			return Result{}, fmt.Errorf("%w: forward to leader %s: %w", ErrTimeout, id, err)
		}
		return Result{}, fmt.Errorf("%w: forward to leader %s: %w", ErrNoLeader, id, err)
	}
}

// applyLocal applies data through this node's Raft and returns the FSM's Result and the
// entry's index. Raft failures wrap ErrNoLeader together with raft's error; ctx ending
// first is ErrTimeout.
func (s *Store) applyLocal(ctx context.Context, data []byte) (Result, uint64, error) {
	timeout := s.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	f := s.raft.Apply(data, timeout)
	if err := waitFuture(ctx, f); err != nil {
		return Result{}, 0, err
	}
	res, ok := f.Response().(Result)
	if !ok {
		return Result{}, 0, fmt.Errorf("%w: unexpected apply response %T", ErrConflict, f.Response())
	}
	return res, f.Index(), nil
}

// notAppended reports a Raft error that proves the entry was never appended (so retrying on
// the real leader cannot apply it twice).
func notAppended(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// awaitLeader returns the current leader (this node's ID when it leads), polling every
// leaderPoll while none is known; ctx ending → ErrNoLeader.
func (s *Store) awaitLeader(ctx context.Context) (id, addr string, err error) {
	for {
		if s.IsLeader() {
			return s.cfg.NodeID, "", nil
		}
		if id, addr = s.Leader(); id != "" && id != s.cfg.NodeID {
			return id, addr, nil
		}
		if err := s.pause(ctx, leaderPoll); err != nil {
			if errors.Is(err, ErrClosed) {
				return "", "", err
			}
			return "", "", fmt.Errorf("%w: no leader known: %w", ErrNoLeader, ctx.Err())
		}
	}
}

// pause waits d, or returns ErrTimeout when ctx ends first, or ErrClosed on Close.
func (s *Store) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	case <-s.stop:
		return ErrClosed
	}
}

// awaitApplied waits until this replica's FSM has applied index, bounded by
// Config.ApplyTimeout and ctx. It never fails the proposal: the entry is committed, only
// this replica is slow to apply it (logged).
func (s *Store) awaitApplied(ctx context.Context, index uint64) {
	if s.fsm.applied() >= index {
		return
	}
	deadline := time.NewTimer(s.cfg.ApplyTimeout)
	defer deadline.Stop()
	for {
		next := s.fsm.applies.wait()
		if s.fsm.applied() >= index {
			return
		}
		select {
		case <-next:
		case <-deadline.C:
			s.logger.Warn("forwarded proposal committed but not yet applied locally",
				"index", index, "applied", s.fsm.applied())
			return
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		}
	}
}
