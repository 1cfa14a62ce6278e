package controller

import (
	"context"
	"errors"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
)

// planMoves is C5, the rebalance planner (docs/internals/moves.md §11): it computes the fewest moves
// that balance the count of owned partitions over the live, non-draining members
// (placement.Rebalance) and aims the first MaxInFlightMoves − in_flight of them with
// SetAssignmentTarget (expected owner = the source). It runs under the placement lock after
// the pass's barrier, so two plans never interleave and a fresh leader never plans against a
// stale state machine. Only single-replica partitions move this way: replicated ones are
// reassigned by C12 (docs/internals/replication.md §9) and are not counted either. A refused
// or vanished CAS (the owner changed, another move was set,
// the topic was deleted) is left to the next pass, which recomputes.
func (c *Controller) planMoves(ctx context.Context) error {
	plan := placement.Rebalance(c.store.Members(), c.store.Topics("", 0), singleReplica(c.store.AllAssignments()), c.cfg.MaxInFlightMoves)
	if plan.Wanted > len(plan.Moves) {
		c.logger.Debug("moves held back by the in-flight budget", "wanted", plan.Wanted,
			"started", len(plan.Moves), "in_flight", plan.InFlight, "max_in_flight", c.cfg.MaxInFlightMoves)
	}
	for _, mv := range plan.Moves {
		res, cur, err := c.store.SetAssignmentTarget(ctx, mv.Topic, mv.Partition, mv.To, mv.From)
		switch {
		case err == nil && res == meta.CASDone:
			c.logger.Info("move planned", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.To)
		case err == nil:
		case errors.Is(err, meta.ErrConflict), errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrInvalid):
			c.logger.Debug("move not planned", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From,
				"to", mv.To, "owner", cur.Owner, "target", cur.Target, "err", err)
		default:
			return err
		}
	}
	return nil
}

// singleReplica keeps the assignments of single-replica partitions (no replica list beyond
// the owner): the ones the move machinery of docs/internals/moves.md serves.
func singleReplica(as []meta.Assignment) []meta.Assignment {
	out := make([]meta.Assignment, 0, len(as))
	for _, a := range as {
		if len(a.ReplicaSet()) < 2 {
			out = append(out, a)
		}
	}
	return out
}
