package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// TransferLeadership hands Raft leadership to the voter id (decommission of the leader,
// docs/internals/moves.md §12.3 condition 6): the leader stops taking proposals, brings id up to date
// and tells it to start an election at once. addr "" takes id's address from the Raft
// configuration. It returns once id has taken over, or with an error when the transfer did
// not finish; either way the caller re-checks IsLeader.
//
// Errors: ErrInvalid (id empty, this node itself, or a non-voter), ErrNotFound (id is not in
// the configuration), ErrNotLeader (this node does not lead; nothing changed), ErrTimeout
// (ctx or ApplyTimeout ended first), ErrNoLeader wrapping raft's error otherwise (for
// example the transfer timed out and this node leads again).
func (s *Store) TransferLeadership(ctx context.Context, id, addr string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if id == "" || id == s.cfg.NodeID {
		return fmt.Errorf("%w: leadership transfer to %q from %q", ErrInvalid, id, s.cfg.NodeID)
	}
	srv, ok := s.raftServer(id)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q is not in the raft configuration", ErrNotFound, id)
	case !srv.Voter:
		return fmt.Errorf("%w: %q is not a voter and cannot lead", ErrInvalid, id)
	}
	if addr == "" {
		addr = srv.Address
	}
	if !s.IsLeader() {
		return fmt.Errorf("%w: leadership transfer to %s", ErrNotLeader, id)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: leadership transfer to %s: %w", ErrTimeout, id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	err := waitFuture(ctx, s.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr)))
	switch {
	case err == nil:
		s.logger.Info("raft leadership transferred", "to", id)
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: leadership transfer to %s: %v", ErrNotLeader, id, err)
	}
	return fmt.Errorf("leadership transfer to %s: %w", id, err)
}
