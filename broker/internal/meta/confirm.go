package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ErrUnconfirmed is returned by Confirm* reads that could not be confirmed by the leader. The
// caller keeps its data and retries later ("deferring is free", docs/internals/metastore.md §13).
var ErrUnconfirmed = errors.New("leader read unconfirmed")

// LeaderReader performs a leader-confirmed read on the current leader over node RPC
// (docs/internals/metastore.md §9, ops 20 and 28). It is implemented by the rpc layer.
//
// Contract: return found=false with a nil error only for an authoritative 404 from the
// leader; return an error for every other failure (unreachable, 421, 503, undecodable, a
// reply not marked leader_read). Calls run on the caller's goroutine and honour ctx (5 s).
type LeaderReader interface {
	ConfirmTopic(ctx context.Context, leaderID, leaderAddr, name string) (t Topic, found bool, err error)
	ConfirmAssignment(ctx context.Context, leaderID, leaderAddr, topic string, partition int) (a Assignment, found bool, err error)
}

// ConfirmTopic is a leader-confirmed read of a topic: on the leader, a barrier issued after
// the call started and then the local FSM; on a follower, Config.LeaderReader. Any error
// (wrapping ErrUnconfirmed) means "unconfirmed": keep data, retry later. found=false with a
// nil error means the topic is authoritatively absent.
func (s *Store) ConfirmTopic(ctx context.Context, name string) (t Topic, found bool, err error) {
	if s.IsLeader() {
		t, found, _, err = s.LeaderReadTopic(ctx, name)
		if err != nil {
			return Topic{}, false, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
		}
		return t, found, nil
	}
	id, addr, err := s.remoteLeader()
	if err != nil {
		return Topic{}, false, err
	}
	t, found, err = s.cfg.LeaderReader.ConfirmTopic(ctx, id, addr, name)
	if err != nil {
		return Topic{}, false, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	return t, found, nil
}

// ConfirmAssignment is the leader-confirmed read of one assignment (same rules as
// ConfirmTopic).
func (s *Store) ConfirmAssignment(ctx context.Context, topic string, partition int) (a Assignment, found bool, err error) {
	if s.IsLeader() {
		a, found, _, err = s.LeaderReadAssignment(ctx, topic, partition)
		if err != nil {
			return Assignment{}, false, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
		}
		return a, found, nil
	}
	id, addr, err := s.remoteLeader()
	if err != nil {
		return Assignment{}, false, err
	}
	a, found, err = s.cfg.LeaderReader.ConfirmAssignment(ctx, id, addr, topic, partition)
	if err != nil {
		return Assignment{}, false, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	return a, found, nil
}

func (s *Store) remoteLeader() (id, addr string, err error) {
	id, addr = s.Leader()
	switch {
	case id == "":
		return "", "", fmt.Errorf("%w: no leader known", ErrUnconfirmed)
	case id == s.cfg.NodeID:
		return "", "", fmt.Errorf("%w: leadership changed during the read", ErrUnconfirmed)
	case s.cfg.LeaderReader == nil:
		return "", "", fmt.Errorf("%w: no leader reader configured", ErrUnconfirmed)
	}
	return id, addr, nil
}

// LeaderReadTopic serves a leader read on the leader (node RPC op 20 with leader_read): a
// barrier issued after the request arrived, then the local FSM. term is the leader's term,
// which the reply carries. A non-leader gets ErrNotLeader (→ 421).
func (s *Store) LeaderReadTopic(ctx context.Context, name string) (t Topic, found bool, term uint64, err error) {
	term, err = s.leaderBarrier(ctx)
	if err != nil {
		return Topic{}, false, 0, err
	}
	t, found = s.Topic(name)
	return t, found, term, nil
}

// LeaderReadAssignment serves GetAssignment (node RPC op 28) like LeaderReadTopic.
func (s *Store) LeaderReadAssignment(ctx context.Context, topic string, partition int) (a Assignment, found bool, term uint64, err error) {
	term, err = s.leaderBarrier(ctx)
	if err != nil {
		return Assignment{}, false, 0, err
	}
	a, found = s.Assignment(topic, partition)
	return a, found, term, nil
}

// leaderBarrier runs a barrier and checks that this node led for the same term before and
// after it, so the local read that follows reflects every entry committed before the call.
func (s *Store) leaderBarrier(ctx context.Context) (uint64, error) {
	term := s.raft.CurrentTerm()
	if s.raft.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	if err := s.Barrier(ctx); err != nil {
		return 0, err
	}
	if s.raft.State() != raft.Leader || s.raft.CurrentTerm() != term {
		return 0, fmt.Errorf("%w: leadership changed during the barrier", ErrNotLeader)
	}
	return term, nil
}
