package controller

import (
	"context"
	"sort"
	"time"

	"narad.dev/broker/internal/meta"
)

// reconcileVoters is C3: "the first three nodes become voters; later ones non-voters that
// are promoted when a voter is lost or removed (keep the voter count odd and ≥ 3 when
// possible)".
//
// Terms: a voter is alive unless its member record says dead (the leader always counts as
// alive; a voter without a record is left alone and counted alive, so a node that has not
// registered yet causes no churn). A non-voter is eligible when its record is alive and not
// draining and its NodeStatus applied index reaches the leader's commit index read just
// before probing it (spec/cluster.md §6.3). Target = Config.MinVoters when the alive voters
// plus the eligible non-voters number at least that, else 1.
//
// A live voter marked draining (being decommissioned) counts neither as alive nor as dead:
// it keeps its vote until C6 removes it, and rule 1 promotes its replacement first.
//
// Policy, in order:
//  1. promote eligible non-voters (by ID) while alive voters < target;
//  2. for each dead voter: with an odd voter count, promote an eligible non-voter first and
//     then demote the dead voter (the count stays odd); with an even count, demote it if the
//     alive voters still meet the target (the count becomes odd); otherwise keep it;
//  3. an even voter count with more alive voters than the target: demote the highest-ID
//     non-leader voter that has an alive record.
//
// The leader is never demoted, and no dead voter is demoted unless the alive voters without
// it meet the target (its replacement exists).
func (c *Controller) reconcileVoters(ctx context.Context) error {
	conf, err := c.store.Configuration()
	if err != nil {
		return err
	}
	members := map[string]meta.Member{}
	for _, m := range c.store.Members() {
		members[m.ID] = m
	}
	v := &voterSet{}
	var nonvoters []meta.RaftServer
	for _, srv := range conf {
		if !srv.Voter {
			nonvoters = append(nonvoters, srv)
			continue
		}
		v.total++
		m, ok := members[srv.ID]
		switch {
		case ok && m.Draining && m.Status != meta.MemberDead:
			// A live voter being decommissioned still votes but no longer counts towards the
			// target, so an eligible non-voter is promoted to take its place before C6
			// removes it (otherwise three voters plus non-voters could never shed a voter).
			v.draining++
		case srv.ID == c.cfg.NodeID:
			v.alive++
		case !ok:
			v.alive++
			if c.noteOnce("voter-without-record/" + srv.ID) {
				c.logger.Info("voter has no member record; left alone", "member", srv.ID)
			}
		case m.Status == meta.MemberDead:
			v.dead = append(v.dead, srv.ID)
		default:
			v.alive++
			v.demotable = append(v.demotable, srv.ID)
		}
	}
	sort.Strings(v.dead)
	sort.Strings(v.demotable)

	var eligible []string
	minVoters := c.cfg.MinVoters
	if v.alive < minVoters || len(v.dead) > 0 { // only then can a promotion be wanted
		eligible = c.eligibleNonvoters(ctx, nonvoters, members)
	}
	target := 1
	if v.alive+len(eligible) >= minVoters {
		target = minVoters
	}
	promote := func() error {
		id := eligible[0]
		eligible = eligible[1:]
		if err := c.store.AddVoter(ctx, id, ""); err != nil {
			c.audit(ctx, "cluster.voter.promote", id, err)
			return err
		}
		v.total++
		v.alive++
		c.logger.Info("non-voter promoted to voter", "member", id, "voters", v.total, "target", target)
		c.audit(ctx, "cluster.voter.promote", id, nil, "voters", v.total)
		return nil
	}
	for v.alive < target && len(eligible) > 0 { // 1
		if err := promote(); err != nil {
			return err
		}
	}
	for _, id := range v.dead { // 2
		if v.total%2 == 1 {
			if len(eligible) == 0 {
				if c.noteOnce("dead-voter-kept/" + id) {
					c.logger.Info("dead voter kept: no caught-up non-voter to replace it", "member", id)
				}
				continue
			}
			if err := promote(); err != nil {
				return err
			}
		}
		if v.alive < target {
			continue
		}
		if err := c.demote(ctx, id, "dead", v); err != nil {
			return err
		}
	}
	if v.total%2 == 0 && v.alive > target && len(v.demotable) > 0 { // 3
		id := v.demotable[len(v.demotable)-1]
		if err := c.demote(ctx, id, "excess", v); err != nil {
			return err
		}
	}
	return nil
}

// voterSet is C3's running count of the Raft configuration's voters.
type voterSet struct {
	total     int      // voters in the configuration
	alive     int      // voters not known dead and not draining (leader and record-less voters included)
	draining  int      // live voters marked draining: still voting, about to be removed
	dead      []string // voters whose record is dead, by ID (never the leader)
	demotable []string // alive non-leader voters with a record, by ID
}

func (c *Controller) demote(ctx context.Context, id, reason string, v *voterSet) error {
	if id == c.cfg.NodeID {
		return nil // never the leader itself
	}
	if err := c.store.DemoteVoter(ctx, id); err != nil {
		c.audit(ctx, "cluster.voter.demote", id, err, "reason", reason)
		return err
	}
	v.total--
	if reason != "dead" {
		v.alive--
	}
	c.forgetNote("dead-voter-kept/" + id)
	c.logger.Info("voter demoted", "member", id, "reason", reason, "voters", v.total)
	c.audit(ctx, "cluster.voter.demote", id, nil, "reason", reason, "voters", v.total)
	return nil
}

// eligibleNonvoters returns the IDs (sorted) of the non-voters that may be promoted now.
func (c *Controller) eligibleNonvoters(ctx context.Context, nonvoters []meta.RaftServer, members map[string]meta.Member) []string {
	if c.cfg.Prober == nil {
		return nil
	}
	sort.Slice(nonvoters, func(i, j int) bool { return nonvoters[i].ID < nonvoters[j].ID })
	var out []string
	for _, srv := range nonvoters {
		m, ok := members[srv.ID]
		if !ok || m.Status != meta.MemberAlive || m.Draining {
			continue
		}
		if c.caughtUp(ctx, m) {
			out = append(out, m.ID)
		}
	}
	return out
}

// caughtUp reports whether m's applied index reaches the leader's commit index as read just
// before the first probe. A current non-voter learns of the newest commits (this pass's
// barrier among them) within a commit interval, so it is probed again for up to CatchUpWait.
func (c *Controller) caughtUp(ctx context.Context, m meta.Member) bool {
	commit := c.store.CommitIndex()
	deadline := time.Now().Add(c.cfg.CatchUpWait)
	var last Status
	var err error
	for {
		pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		last, err = c.cfg.Prober.NodeStatus(pctx, m)
		cancel()
		if err == nil && last.AppliedIndex >= commit {
			return true
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		t := time.NewTimer(c.cfg.CatchUpWait / 10)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	c.logger.Debug("non-voter not promotable", "member", m.ID, "applied_index", last.AppliedIndex,
		"commit_index", commit, "err", err)
	return false
}
