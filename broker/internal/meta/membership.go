package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Raft membership (docs/internals/metastore.md §11): the Raft configuration says who votes; the member
// records say who is alive. Configuration changes run on the leader only; each is bounded by
// ctx and Config.ApplyTimeout. Errors: ErrNotLeader when this node is not the leader (nothing
// changed; retry on the leader), ErrTimeout when ctx or the timeout ends first, ErrNoLeader
// wrapping raft's error otherwise (outcome unknown).

// Raft roles as reported by RaftRole (and the API's raft_role).
const (
	RaftVoter    = "voter"
	RaftNonvoter = "nonvoter"
	RaftNone     = "none"
)

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	ID      string
	Address string // Raft address (cluster_addr)
	Voter   bool   // false: a non-voter (or staging server) that receives the log without voting
}

// Configuration returns the latest Raft configuration known to this node (on the leader it
// may include a change not yet committed). Works on every node.
func (s *Store) Configuration() ([]RaftServer, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ApplyTimeout)
	defer cancel()
	f := s.raft.GetConfiguration()
	if err := waitFuture(ctx, f); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	conf := f.Configuration()
	out := make([]RaftServer, 0, len(conf.Servers))
	for _, srv := range conf.Servers {
		out = append(out, RaftServer{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return out, nil
}

// RaftRole returns RaftVoter, RaftNonvoter or RaftNone (absent from the configuration, or
// the configuration could not be read) for id.
func (s *Store) RaftRole(id string) string {
	srv, ok := s.raftServer(id)
	switch {
	case !ok:
		return RaftNone
	case srv.Voter:
		return RaftVoter
	}
	return RaftNonvoter
}

func (s *Store) raftServer(id string) (RaftServer, bool) {
	conf, err := s.Configuration()
	if err != nil {
		return RaftServer{}, false
	}
	for _, srv := range conf {
		if srv.ID == id {
			return srv, true
		}
	}
	return RaftServer{}, false
}

// AddNonvoter admits id at addr as a non-voter (JoinCluster, docs/internals/metastore.md §11).
// Idempotent: a server already present at addr (voter or not) is left unchanged; a changed
// address re-adds it at the new address (a voter keeps its vote).
func (s *Store) AddNonvoter(ctx context.Context, id, addr string) error {
	if id == "" || addr == "" {
		return fmt.Errorf("%w: AddNonvoter needs an id and an address", ErrInvalid)
	}
	if srv, ok := s.raftServer(id); ok && srv.Address == addr {
		return nil
	}
	return s.changeMembership(ctx, "add nonvoter "+id, func(timeout time.Duration) raft.IndexFuture {
		return s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	})
}

// AddVoter gives id a vote (promotion). addr "" keeps the address the configuration has for
// id (ErrNotFound if id is not in it). Idempotent for a voter already at that address.
func (s *Store) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" {
		return fmt.Errorf("%w: AddVoter needs an id", ErrInvalid)
	}
	srv, ok := s.raftServer(id)
	if addr == "" {
		if !ok {
			return fmt.Errorf("%w: %q is not in the raft configuration", ErrNotFound, id)
		}
		addr = srv.Address
	}
	if ok && srv.Voter && srv.Address == addr {
		return nil
	}
	return s.changeMembership(ctx, "add voter "+id, func(timeout time.Duration) raft.IndexFuture {
		return s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	})
}

// DemoteVoter takes id's vote away; it keeps receiving the log as a non-voter. A server that
// is absent or already a non-voter is left alone. Demoting the leader itself makes it step
// down; callers avoid that.
func (s *Store) DemoteVoter(ctx context.Context, id string) error {
	if srv, ok := s.raftServer(id); !ok || !srv.Voter {
		return nil
	}
	return s.changeMembership(ctx, "demote voter "+id, func(timeout time.Duration) raft.IndexFuture {
		return s.raft.DemoteVoter(raft.ServerID(id), 0, timeout)
	})
}

// RemoveServer removes id from the Raft configuration (decommission, docs/internals/metastore.md §11);
// its member record is kept. An absent id is a no-op.
func (s *Store) RemoveServer(ctx context.Context, id string) error {
	if _, ok := s.raftServer(id); !ok {
		return nil
	}
	return s.changeMembership(ctx, "remove server "+id, func(timeout time.Duration) raft.IndexFuture {
		return s.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	})
}

// changeMembership runs one configuration change on the leader and waits for it to commit.
func (s *Store) changeMembership(ctx context.Context, what string, start func(time.Duration) raft.IndexFuture) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if !s.IsLeader() {
		return fmt.Errorf("%w: %s", ErrNotLeader, what)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTimeout, what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	timeout := s.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	err := waitFuture(ctx, start(timeout))
	switch {
	case err == nil:
		s.logger.Info("raft configuration changed", "change", what)
		return nil
	case notAppended(err):
		return fmt.Errorf("%w: %s: %v", ErrNotLeader, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// CommitIndex is the highest log index this node knows to be committed (the leader's is the
// cluster's). Promotion compares a non-voter's applied index against the leader's.
func (s *Store) CommitIndex() uint64 { return s.raft.CommitIndex() }

// Term is this node's current Raft term.
func (s *Store) Term() uint64 { return s.raft.CurrentTerm() }
