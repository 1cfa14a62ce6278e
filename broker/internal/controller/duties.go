package controller

import (
	"context"
	"time"

	"narad.dev/broker/internal/meta"
)

// duty is one job of a controller pass. Duties run in list order on the controller
// goroutine; a duty with placement set runs under the placement lock (docs/internals/metastore.md §12)
// from its first read of placement until its last proposal.
type duty struct {
	name      string // C1 … C13, for logs
	placement bool
	run       func(ctx context.Context) error
}

// dutyList is the pass, in order. Liveness comes first so every later duty sees fresh
// statuses and dead_since; GC comes last. Failover (C10) follows liveness at once: a
// replicated partition without a live leader is unavailable until it runs. Both election
// duties change leaders, which placement and decommission count, so they hold the lock; C12
// (replica reassignment) follows them, so it never plans around a leader that just failed;
// C13 (replica balance) follows C12, so it counts the steps C12 just took and plans only
// partitions C12 has nothing to do for.
//
// Moves: C4 clears the targets of moves aimed at gone or dead destinations and C6's first
// step clears those aimed at draining nodes, both before the planner (C5), so the budget they
// free is used in the same pass; C6 then removes drained nodes from Raft, and C7 exports what
// is blocked. Every duty that reads placement sets placement.
func (c *Controller) dutyList() []duty {
	return []duty{
		{name: "C1 liveness", run: c.liveness},
		{name: "C10 failover", placement: true, run: c.failover},
		{name: "C11 preferred leaders", placement: true, run: c.preferredLeaders},
		{name: "C12 replica sets", placement: true, run: c.reassignReplicas},
		{name: "C13 replica balance", placement: true, run: c.balanceReplicas},
		{name: "C2 assign", placement: true, run: c.assignUnassigned},
		{name: "C3 voters", run: c.reconcileVoters},
		{name: "C4 dead targets", placement: true, run: c.clearDeadTargets},
		{name: "C6 draining targets", placement: true, run: c.clearDrainingTargets},
		{name: "C5 planner", placement: true, run: c.planMoves},
		{name: "C6 decommission", placement: true, run: c.decommission},
		{name: "C7 blocked", run: c.exportBlocked},
		{name: "C8 seed root", run: c.seedRoot},
		{name: "C9 member gc", placement: true, run: c.collectMembers},
	}
}

// passBarrier marks ctx as the leader's and waits for a Raft barrier, after which this
// node's FSM holds every committed entry (a fresh leader trusts it only then,
// docs/internals/metastore.md §9). It returns the marked context.
func (c *Controller) passBarrier(ctx context.Context) (context.Context, error) {
	ctx = meta.LeaderOnly(ctx)
	bctx, cancel := context.WithTimeout(ctx, meta.BarrierTimeout)
	defer cancel()
	return ctx, c.store.Barrier(bctx)
}

// runPass runs one pass: a barrier (a fresh leader trusts its FSM only after one, docs/internals/metastore.md §9),
// then every duty. A duty's failure is logged and the next duty runs, unless the failure
// means leadership or the metastore is gone.
func (c *Controller) runPass(ctx context.Context) {
	if !c.store.IsLeader() {
		return
	}
	ctx, err := c.passBarrier(ctx)
	if err != nil {
		c.logger.Info("controller pass skipped: barrier failed", "err", err)
		return
	}
	for _, d := range c.duties {
		if ctx.Err() != nil || !c.store.IsLeader() {
			return
		}
		if err := c.runDuty(ctx, d); err != nil {
			if stopsPass(err) {
				c.logger.Info("controller pass stopped", "duty", d.name, "err", err)
				return
			}
			c.logger.Warn("controller duty failed", "duty", d.name, "err", err)
		}
	}
	c.passes.Add(1)
}

func (c *Controller) runDuty(ctx context.Context, d duty) error {
	if d.placement {
		c.placement.Lock()
		defer c.placement.Unlock()
	}
	return d.run(ctx)
}

// seedRoot is C8: seed the root admin once (the callback decides how; RootSeeded makes it a
// no-op once any leader has done it).
func (c *Controller) seedRoot(ctx context.Context) error {
	if c.cfg.SeedRoot == nil || c.store.RootSeeded() {
		return nil
	}
	return c.cfg.SeedRoot(ctx)
}

func (c *Controller) now() time.Time { return c.cfg.Now() }
