package controller

import (
	"context"
	"errors"
	"time"

	"narad.dev/broker/internal/meta"
)

// Why a move's target is cleared (log values of the "reason" key).
const (
	clearTargetNotMember = "target_not_member" // C4: no member record
	clearTargetDead      = "target_dead"       // C4: dead past DeadTargetAbortAfter on this leader's clock
	clearTargetRemoved   = "target_removed"    // C4: out of the Raft configuration while dead or draining
	clearTargetDraining  = "target_draining"   // C6: moves are never aimed at a leaving node
)

// clearDeadTargets is C4 (docs/internals/moves.md §10): only a destination gives up its own move, and
// a dead one cannot, so the leader clears (AbortMove CAS, expected target = T) the target of
// every in-flight move whose target T has no member record, has been dead for at least
// DeadTargetAbortAfter as measured by this leader's own dead_since (a new leader never acts
// on a stamp it inherited, and a restarting pod still finishes its copy), or is in neither
// the voter set nor the non-voters of the Raft configuration while dead or draining.
// Clearing is always safe: the partition never left its owner. It runs before the planner,
// which spends the freed budget in the same pass.
func (c *Controller) clearDeadTargets(ctx context.Context) error {
	conf, err := c.membership.Configuration()
	if err != nil {
		return err
	}
	inRaft := make(map[string]bool, len(conf))
	for _, srv := range conf {
		inRaft[srv.ID] = true
	}
	members := memberMap(c.store.Members())
	now := c.now()
	for _, a := range c.store.AllAssignments() {
		if a.Target == "" {
			continue
		}
		why := c.deadTargetReason(members, inRaft, a.Target, now)
		if why == "" {
			continue
		}
		if err := c.clearTarget(ctx, a, why); err != nil {
			return err
		}
	}
	return nil
}

// deadTargetReason returns why C4 clears a move aimed at target, or "" to leave it.
func (c *Controller) deadTargetReason(members map[string]meta.Member, inRaft map[string]bool, target string, now time.Time) string {
	m, ok := members[target]
	if !ok {
		return clearTargetNotMember
	}
	dead := m.Status == meta.MemberDead
	if dead {
		if since, ok := c.DeadSince(target); ok && now.Sub(since) >= c.cfg.DeadTargetAbortAfter {
			return clearTargetDead
		}
	}
	if !inRaft[target] && (dead || m.Draining) {
		return clearTargetRemoved
	}
	return ""
}

// clearTarget proposes AbortMove(a, expected target = a.Target). A target changed meanwhile
// (CASNoop) or a deleted topic is left to the next pass; other errors end the duty.
func (c *Controller) clearTarget(ctx context.Context, a meta.Assignment, why string) error {
	res, cur, err := c.store.AbortMove(ctx, a.Topic, a.Partition, a.Target)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return nil
	case err != nil:
		return err
	case res == meta.CASDone:
		c.logger.Warn("move target cleared", "topic", a.Topic, "partition", a.Partition,
			"owner", a.Owner, "target", a.Target, "reason", why)
	default:
		c.logger.Debug("move target not cleared: it changed meanwhile", "topic", a.Topic,
			"partition", a.Partition, "expected_target", a.Target, "target", cur.Target, "owner", cur.Owner)
	}
	return nil
}

// memberMap indexes members by ID.
func memberMap(ms []meta.Member) map[string]meta.Member {
	out := make(map[string]meta.Member, len(ms))
	for _, m := range ms {
		out[m.ID] = m
	}
	return out
}
