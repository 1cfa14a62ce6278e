package controller

import (
	"context"
	"errors"
	"time"

	"narad.dev/broker/internal/meta"
)

// liveness is C1 (docs/internals/metastore.md §11): a member whose last heartbeat is older than
// DeadAfter is marked dead; dead_since is kept per member on this leader's clock, set when
// it first observes the member dead and cleared when the member is alive again.
//
// A new leader measures silence from no earlier than the moment it gained leadership, so a
// whole-cluster restart does not mark every member dead on the first pass with stamps it
// inherited; a member silent since before the election is marked dead DeadAfter after it.
// The leader never marks itself dead: it is running this code.
func (c *Controller) liveness(ctx context.Context) error {
	now := c.now()
	c.mu.Lock()
	since := c.leaderSince
	c.mu.Unlock()
	members := c.store.Members()
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		seen[m.ID] = true
		switch {
		case m.ID == c.cfg.NodeID:
			c.observe(m.ID, false, now)
			continue
		case m.Status == meta.MemberDead:
			c.observe(m.ID, true, now)
			continue
		}
		last := time.Unix(m.LastHeartbeat, 0)
		if since.After(last) {
			last = since
		}
		if now.Sub(last) <= c.cfg.DeadAfter {
			c.observe(m.ID, false, now)
			continue
		}
		// Re-read: a heartbeat may have landed since the scan.
		if cur, ok := c.store.Member(m.ID); !ok || cur.Status == meta.MemberDead || cur.LastHeartbeat != m.LastHeartbeat {
			continue
		}
		if err := c.store.MemberDead(ctx, m.ID); err != nil {
			if errors.Is(err, meta.ErrNotFound) {
				continue // removed meanwhile
			}
			return err
		}
		c.observe(m.ID, true, now)
		c.logger.Info("member marked dead", "member", m.ID, "last_heartbeat", m.LastHeartbeat,
			"silent_for", now.Sub(time.Unix(m.LastHeartbeat, 0)).Round(time.Second).String())
	}
	c.mu.Lock()
	for id := range c.deadSince {
		if !seen[id] {
			delete(c.deadSince, id)
		}
	}
	c.mu.Unlock()
	return nil
}

// observe records one observation of a member: dead starts its dead_since (once), alive
// clears it.
func (c *Controller) observe(id string, dead bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !dead {
		delete(c.deadSince, id)
		return
	}
	if _, ok := c.deadSince[id]; !ok {
		c.deadSince[id] = now
	}
}
