package controller

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
)

// Errors of the decommission calls (docs/internals/http-api.md §2.17).
var (
	// ErrRefused: the decommission could never complete; the Verdict carries the reasons
	// (409). Nothing changed.
	ErrRefused = errcode.Sub("decommission refused", errcode.ErrRefused)
	// ErrRemoved: the member is already out of the Raft configuration, so its decommission
	// cannot be cancelled (409).
	ErrRemoved = errcode.Sub("member already removed from the raft configuration", errcode.ErrRefused)
)

// clearDrainingTargets is C6's first step (docs/internals/moves.md §12.2): clear (AbortMove CAS) every
// move aimed at a draining node, so no partition lands on a node that is leaving, except a
// move whose source is dead or has no member record: the draining node may hold the only
// live copy, which it force-promotes and then drains off like any partition it owns
// (move_target, logged at error once per leadership). It runs before the planner so the
// freed budget is used in the same pass.
func (c *Controller) clearDrainingTargets(ctx context.Context) error {
	members := memberMap(c.store.Members())
	for _, a := range c.store.AllAssignments() {
		if a.Target == "" || !members[a.Target].Draining {
			continue
		}
		if src, ok := members[a.Owner]; !ok || src.Status == meta.MemberDead {
			if c.noteOnce(fmt.Sprintf("drain-target-kept/%s/%d/%s/%s", a.Topic, a.Partition, a.Owner, a.Target)) {
				c.logger.Error("move onto a draining node left alone: its source is dead or not a member",
					"topic", a.Topic, "partition", a.Partition, "owner", a.Owner, "target", a.Target,
					"reason", ReasonMoveTarget)
			}
			continue
		}
		if err := c.clearTarget(ctx, a, clearTargetDraining); err != nil {
			return err
		}
	}
	return nil
}

// decommission is C6's removal step (docs/internals/moves.md §12.3), under the placement lock from its
// read of placement until the last removal, so neither a flip nor a topic create can land a
// partition on a node being removed. Draining members are taken in drainingOrder; a draining
// node D is removed from the Raft configuration (its member record stays) when it owns
// nothing, is no move's target (move_target), reports a zero ingress backlog itself
// (ingress_backlog; a dead node cannot be asked and is not probed), and, for a voter, keeps
// MinVoters voters (min_voters) with a strictly alive majority (no_live_majority) and is not
// this leader: then leadership is handed to an alive voter and the duty stops
// (leader_transfer); the next leader finishes. A non-voter skips the voter guards. The
// reasons found are kept for DecommissionBlocked and exported by C7.
func (c *Controller) decommission(ctx context.Context) error {
	v, err := c.readView()
	if err != nil {
		return err
	}
	order := v.drainingOrder()
	found := make(map[string][]string, len(order))
	prev := c.DecommissionBlocked()
	for _, id := range order {
		found[id] = prev[id] // kept if the duty ends before reaching id
		if found[id] == nil {
			found[id] = []string{}
		}
	}
	defer func() { c.setDecomBlocked(found) }()

	for _, id := range order {
		if _, ok := v.conf[id]; !ok {
			found[id] = []string{} // removed already; nothing left to do
			continue
		}
		reasons := v.upfront(id)
		if v.targeted[id] > 0 {
			reasons = append(reasons, ReasonMoveTarget)
		}
		if v.owned[id] > 0 || len(reasons) > 0 {
			found[id] = nonNil(reasons)
			continue
		}
		if v.alive(id) && !c.backlogDrained(ctx, v.members[id]) {
			found[id] = []string{ReasonIngressBacklog}
			continue
		}
		if v.voter(id) && id == v.self {
			found[id] = []string{ReasonLeaderTransfer}
			c.handOffLeadership(ctx, v)
			return nil
		}
		voter := v.voter(id)
		if err := c.membership.RemoveServer(ctx, id); err != nil {
			c.audit(ctx, "cluster.member.remove", id, err)
			return err
		}
		delete(v.conf, id)
		found[id] = []string{}
		c.logger.Info("drained member removed from the raft configuration", "member", id,
			"voter", voter, "alive", v.alive(id))
		c.audit(ctx, "cluster.member.remove", id, nil, "voter", voter)
	}
	return nil
}

// backlogDrained asks m itself for its ingress backlog (docs/internals/node-rpc.md §6). No prober,
// or a failed call, counts as a backlog.
func (c *Controller) backlogDrained(ctx context.Context, m meta.Member) bool {
	if c.cfg.Prober == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
	st, err := c.cfg.Prober.NodeStatus(pctx, m)
	cancel()
	if err != nil {
		c.logger.Debug("draining member's backlog unknown", "member", m.ID, "err", err)
		return false
	}
	if !st.ZeroBacklog() {
		c.logger.Debug("draining member still has an ingress backlog", "member", m.ID,
			"draining_seen", st.DrainingSeen, "refusing_produce", st.RefusingProduce,
			"admitted_inflight", st.AdmittedInflight, "ingress_undispatched", st.IngressUndispatched)
		return false
	}
	return true
}

// handOffLeadership transfers leadership to an alive voter other than this leader,
// preferring one that is not draining, then the lowest ID.
func (c *Controller) handOffLeadership(ctx context.Context, v *clusterView) {
	var to meta.RaftServer
	for _, srv := range v.conf {
		if !srv.Voter || srv.ID == v.self || !v.alive(srv.ID) {
			continue
		}
		better := to.ID == "" ||
			v.members[to.ID].Draining && !v.members[srv.ID].Draining ||
			v.members[to.ID].Draining == v.members[srv.ID].Draining && srv.ID < to.ID
		if better {
			to = srv
		}
	}
	if to.ID == "" {
		if c.noteOnce("leader-transfer-none") {
			c.logger.Warn("draining leader cannot hand over: no other alive voter")
		}
		return
	}
	c.logger.Info("transferring leadership off the draining leader", "to", to.ID)
	if err := c.membership.TransferLeadership(ctx, to.ID, to.Address); err != nil {
		c.logger.Warn("leadership transfer failed", "to", to.ID, "err", err)
	}
}

// Decommission starts draining member id (POST /v1/cluster/members/{id}/decommission,
// docs/internals/http-api.md §2.17). It runs on the leader, after a barrier, under the placement lock:
// unknown id → meta.ErrNotFound; the up-front verdict is computed; a dry run returns it and
// changes nothing; a verdict that is not allowed returns it with ErrRefused and changes
// nothing; otherwise the drain flag is set (op 18; already set → nothing proposed) and the
// verdict is returned. Not the leader → meta.ErrNotLeader; a failed barrier or proposal
// returns the metastore's error (503).
func (c *Controller) Decommission(ctx context.Context, id string, dryRun bool) (Verdict, error) {
	none := Verdict{Node: id, Reasons: []string{}}
	if err := c.leaderBarrier(ctx, "decommission"); err != nil {
		return none, err
	}
	c.placement.Lock()
	defer c.placement.Unlock()
	m, ok := c.store.Member(id)
	if !ok {
		return none, fmt.Errorf("%w: member %q", meta.ErrNotFound, id)
	}
	v, err := c.readView()
	if err != nil {
		return none, err
	}
	verdict := v.verdict(id)
	switch {
	case dryRun:
		verdict.Moves = c.drainPlan(id)
		return verdict, nil
	case !verdict.Allowed:
		return verdict, fmt.Errorf("%w: %s: %s", ErrRefused, id, strings.Join(verdict.Reasons, ", "))
	case m.Draining:
		return verdict, nil
	}
	if err := c.store.SetMemberDraining(meta.LeaderOnly(ctx), id, true); err != nil {
		return verdict, err
	}
	c.logger.Info("decommission started", "member", id)
	return verdict, nil
}

// drainPlan is what the planner would plan, as things stand, with id draining: every move of
// the balance, not cut to the in-flight budget (moves already in flight are not repeated),
// then the replica reassignments of its replicated partitions (drainReplicas).
func (c *Controller) drainPlan(id string) []PlannedMove {
	members := c.store.Members()
	for i := range members {
		if members[i].ID == id {
			members[i].Draining = true
		}
	}
	plan := placement.Rebalance(members, c.store.Topics("", 0), singleReplica(c.store.AllAssignments()), math.MaxInt32)
	out := make([]PlannedMove, 0, len(plan.Moves))
	for _, mv := range plan.Moves {
		out = append(out, PlannedMove{Topic: mv.Topic, Partition: mv.Partition, From: mv.From, To: mv.To})
	}
	return append(out, c.drainReplicas(id, members)...)
}

// drainReplicas is the replicated part of a dry run's plan: for each replicated partition id
// is a replica of, the node C12 would add in its place (docs/internals/replication.md §9), as
// a move from id; a partition whose replacement already joined, or that has none to take it,
// is not listed. members already show id draining.
func (c *Controller) drainReplicas(id string, members []meta.Member) []PlannedMove {
	c.mu.Lock()
	since := c.leaderSince
	c.mu.Unlock()
	all := c.store.AllAssignments()
	v := newLeaderView(c.cfg.NodeID, c.now(), since, c.cfg.ReplicaFailoverAfter, c.store.Topics("", 0), members, all)
	racks := make(map[string]string, len(members))
	for _, m := range members {
		racks[m.ID] = m.Rack
	}
	nodes, load, leaving := placement.Nodes(members), placement.LoadOf(all), c.leaving(v)
	var out []PlannedMove
	for _, a := range v.parts {
		if !slices.Contains(a.ReplicaSet(), id) {
			continue
		}
		want := desiredReplicas(a, v.topics[a.Topic].RF(), leaving, nodes, racks, load)
		for _, to := range want {
			if !slices.Contains(a.ReplicaSet(), to) {
				out = append(out, PlannedMove{Topic: a.Topic, Partition: a.Partition, From: id, To: to})
				break
			}
		}
	}
	return out
}

// CancelDecommission clears member id's drain flag (DELETE …/decommission): on the leader,
// after a barrier, under the placement lock (so it cannot interleave with a removal).
// Unknown id → meta.ErrNotFound; id already out of the Raft configuration → ErrRemoved; not
// draining → nil with nothing proposed. Not the leader → meta.ErrNotLeader.
func (c *Controller) CancelDecommission(ctx context.Context, id string) error {
	if err := c.leaderBarrier(ctx, "cancel decommission"); err != nil {
		return err
	}
	c.placement.Lock()
	defer c.placement.Unlock()
	m, ok := c.store.Member(id)
	if !ok {
		return fmt.Errorf("%w: member %q", meta.ErrNotFound, id)
	}
	v, err := c.readView()
	if err != nil {
		return err
	}
	if _, in := v.conf[id]; !in {
		return fmt.Errorf("%w: %s", ErrRemoved, id)
	}
	if !m.Draining {
		return nil
	}
	if err := c.store.SetMemberDraining(meta.LeaderOnly(ctx), id, false); err != nil {
		return err
	}
	c.dropDecomBlocked(id)
	c.logger.Info("decommission cancelled", "member", id)
	return nil
}

// leaderBarrier fails with meta.ErrNotLeader off the leader and otherwise waits for a
// barrier, so the API calls decide on the latest committed state.
func (c *Controller) leaderBarrier(ctx context.Context, what string) error {
	if c.store == nil {
		return meta.ErrClosed
	}
	if !c.store.IsLeader() {
		return fmt.Errorf("%w: %s", meta.ErrNotLeader, what)
	}
	bctx, cancel := context.WithTimeout(ctx, meta.BarrierTimeout)
	defer cancel()
	return c.store.Barrier(bctx)
}

func nonNil(rs []string) []string {
	if rs == nil {
		return []string{}
	}
	return rs
}
