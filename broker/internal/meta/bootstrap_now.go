package meta

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// HasState reports whether this node has any Raft state (log, stable term or snapshot): a node
// with state never bootstraps and never needs to join again.
func (s *Store) HasState() bool {
	has, err := raft.HasExistingState(s.logs, s.logs, s.snaps)
	return err != nil || has // an unreadable store counts as "has state": never bootstrap over it
}

// BootstrapSelf bootstraps a new cluster with this node as its single voter, on a running
// Store that has no Raft state (the join loop's "no peer answered" decision, docs/internals/metastore.md §11). With state it does nothing and returns nil.
func (s *Store) BootstrapSelf() error {
	if s.HasState() {
		return nil
	}
	cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.NodeID), Address: s.trans.LocalAddr()}}}
	if err := s.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("meta: bootstrap: %w", err)
	}
	s.logger.Info("bootstrapped a new cluster as its first voter")
	return nil
}
