package server

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"narad.dev/broker/internal/config"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
)

// Join cadence (docs/internals/metastore.md §14).
const (
	joinInterval      = 2 * time.Second
	bootstrapAfterTry = 3 // rounds with no cluster found before the lowest initial member bootstraps
)

// joinCluster is the join loop of docs/internals/metastore.md §11: until this node's Raft knows a leader,
// ask the --join peers (following leader hints) to admit it as a non-voter. A node listed first
// (lowest id) in --initial-members that finds no existing cluster for a few rounds, and has no
// Raft state, bootstraps a new one instead (docs/internals/metastore.md §11: only initial members bootstrap, and only on an empty disk).
func joinCluster(ctx context.Context, cfg config.Serve, store *meta.Store, p noderpc.Peers, advertise string, logger *slog.Logger) error {
	mayBootstrap := isLowestInitialMember(cfg.NodeID, cfg.InitialMembers)
	quiet := 0 // rounds in which no peer knew of a cluster
	for round := 0; ; round++ {
		if hasLeader(store) {
			return nil
		}
		if round > 0 || !store.HasState() {
			found := false
			for _, addr := range cfg.Join {
				if addr == advertise {
					continue
				}
				ok, err := p.AskToJoin(ctx, addr, cfg.NodeID, advertise)
				if err != nil {
					logger.Debug("join attempt", "peer", addr, "err", err)
				}
				if ok {
					found = true
					break
				}
			}
			if found {
				quiet = 0
			} else {
				quiet++
			}
			if mayBootstrap && quiet >= bootstrapAfterTry && !store.HasState() {
				logger.Info("no existing cluster answered; bootstrapping as the lowest initial member", "node", cfg.NodeID)
				if err := store.BootstrapSelf(); err != nil {
					return err
				}
			}
		}
		if waitLeader(ctx, store, joinInterval) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if round%5 == 4 {
			logger.Warn("still waiting to join the cluster", "node", cfg.NodeID, "peers", cfg.Join)
		}
	}
}

func isLowestInitialMember(id string, initial []string) bool {
	if len(initial) == 0 || !slices.Contains(initial, id) {
		return false
	}
	return slices.Min(initial) == id
}

func hasLeader(store *meta.Store) bool {
	id, _ := store.Leader()
	return id != ""
}

// waitLeader polls for a known leader for up to d; true when one is known.
func waitLeader(ctx context.Context, store *meta.Store, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if hasLeader(store) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return hasLeader(store)
}
