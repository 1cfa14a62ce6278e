package controller

import (
	"context"
	"errors"
	"time"

	"narad.dev/broker/internal/meta"
)

// collectMembers is C9 (docs/internals/metastore.md §11): delete (op 19) the record of a member that is
// out of the Raft configuration, owns no partition, is no move's target, and has been dead
// for at least RemoveDeadAfter on this leader's own clock (dead_since, so a stamp inherited
// from an earlier leader never counts). RemoveMember re-checks ownership in Apply.
func (c *Controller) collectMembers(ctx context.Context) error {
	conf, err := c.store.Configuration()
	if err != nil {
		return err
	}
	inRaft := make(map[string]bool, len(conf))
	for _, srv := range conf {
		inRaft[srv.ID] = true
	}
	busy := map[string]bool{}
	for _, a := range c.store.AllAssignments() {
		busy[a.Owner] = true
		if a.Target != "" {
			busy[a.Target] = true
		}
	}
	now := c.now()
	for _, m := range c.store.Members() {
		if m.Status != meta.MemberDead || inRaft[m.ID] || busy[m.ID] || m.ID == c.cfg.NodeID {
			continue
		}
		since, ok := c.DeadSince(m.ID)
		if !ok || now.Sub(since) < c.cfg.RemoveDeadAfter {
			continue
		}
		err := c.store.RemoveMember(ctx, m.ID)
		switch {
		case err == nil:
			c.logger.Info("member record garbage-collected", "member", m.ID,
				"dead_for", now.Sub(since).Round(time.Second).String())
			c.audit(ctx, "cluster.member.forget", m.ID, nil, "dead_for", now.Sub(since).Round(time.Second).String())
		case errors.Is(err, meta.ErrNotFound):
		case errors.Is(err, meta.ErrConflict):
			c.logger.Info("member record kept: it owns or receives a partition", "member", m.ID, "err", err)
			continue
		default:
			return err
		}
		c.mu.Lock()
		delete(c.deadSince, m.ID)
		c.mu.Unlock()
	}
	return nil
}
