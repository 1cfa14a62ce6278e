package controller

import "context"

// checkFailover runs C10 on its own, between passes, when a replicated partition's leader has
// failed and a live in-sync replica can take over (docs/internals/replication.md §7). The
// pass runs once a Tick (10 s): waiting for it would add up to a tick to every failover, on
// top of --replica-failover-after. The check reads the local metastore replica only; the
// barrier and the proposals happen only when an election is due, so an idle cluster pays one
// read every FailoverCheck.
func (c *Controller) checkFailover(ctx context.Context) {
	defer c.checks.Add(1)
	if !c.isLeading() || !c.store.IsLeader() || !c.failoverDue() {
		return
	}
	ctx, err := c.passBarrier(ctx)
	if err != nil {
		c.logger.Info("failover check skipped: barrier failed", "err", err)
		return
	}
	if err := c.runDuty(ctx, duty{name: "C10 failover", placement: true, run: c.failover}); err != nil {
		c.logger.Warn("controller duty failed", "duty", "C10 failover (between passes)", "err", err)
	}
}

// failoverDue reports whether planFailover has an election to make now.
func (c *Controller) failoverDue() bool {
	return len(c.readLeaderView().planFailover().elections) > 0
}
