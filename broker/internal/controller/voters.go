package controller

import (
	"context"
	"sort"
	"time"

	"narad.dev/broker/internal/meta"
)

// reconcileVoters is C3: "the first three nodes become voters; later ones non-voters that
// are promoted when a voter is lost or removed (keep the voter count odd and ≥ 3 when
// possible)". It observes the Raft configuration and the member records, probes the
// non-voters a promotion could use (promotionCandidates), plans with planVoters (pure; its
// doc holds the policy) and applies the plan in order, stopping at the first failed change.
func (c *Controller) reconcileVoters(ctx context.Context) error {
	conf, err := c.store.Configuration()
	if err != nil {
		return err
	}
	obs := voterObservation{Self: c.cfg.NodeID, MinVoters: c.cfg.MinVoters, Conf: conf, Members: map[string]meta.Member{}}
	for _, m := range c.store.Members() {
		obs.Members[m.ID] = m
	}
	if c.cfg.Prober != nil {
		obs.CaughtUp = map[string]bool{}
		for _, id := range promotionCandidates(obs) {
			obs.CaughtUp[id] = c.caughtUp(ctx, obs.Members[id])
		}
	}
	return c.applyVoterPlan(ctx, planVoters(obs))
}

// voterObservation is what C3 decides from.
type voterObservation struct {
	Self      string                 // this node, the Raft leader
	MinVoters int                    // Config.MinVoters
	Conf      []meta.RaftServer      // the Raft configuration
	Members   map[string]meta.Member // member records by ID
	// CaughtUp holds the non-voters whose NodeStatus applied index reached the leader's
	// commit index (caughtUp); only promotionCandidates are probed, and only when a
	// promotion can be wanted. Nil when there is no prober.
	CaughtUp map[string]bool
}

// voterPlan is C3's decision: the target voter count and the actions, in order.
type voterPlan struct {
	Target  int
	Actions []voterAction
}

// voterAction is one step of a voterPlan.
type voterAction struct {
	Kind   voterActionKind
	ID     string // the member acted on
	Reason string // why (reason* constants); a demotion logs and audits it
	Voters int    // the voter count once the action is done
}

type voterActionKind int

const (
	actPromote         voterActionKind = iota + 1 // AddVoter
	actDemote                                     // DemoteVoter
	actKeepDead                                   // a dead voter stays: noted once per leadership
	actLeaveUnrecorded                            // a voter without a record stays: noted once
)

// Reasons of voter actions. reasonDead and reasonExcess are the demotion reasons in logs and
// audit records (docs/operating.md, Audit events).
const (
	reasonBelowTarget   = "below_target"   // promote: alive voters < target
	reasonReplaceDead   = "replace_dead"   // promote: make room to demote a dead voter
	reasonDead          = "dead"           // demote: the voter's record is dead
	reasonExcess        = "excess"         // demote: even count above the target
	reasonNoReplacement = "no_replacement" // keep: no caught-up non-voter to replace it
	reasonNoRecord      = "no_record"      // leave alone: not registered (yet)
)

// voterSet is C3's running count of the Raft configuration's voters.
type voterSet struct {
	total      int      // voters in the configuration
	alive      int      // voters not known dead and not draining (leader and record-less voters included)
	draining   int      // live voters marked draining: still voting, about to be removed
	dead       []string // voters whose record is dead, by ID (never the leader)
	demotable  []string // alive non-leader voters with a record, by ID
	unrecorded []string // voters without a member record, by ID (counted alive)
}

// countVoters classifies obs's voters. A voter is alive unless its member record says dead
// (the leader always counts as alive; a voter without a record is left alone and counted
// alive, so a node that has not registered yet causes no churn). A live voter marked
// draining (being decommissioned) counts neither as alive nor as dead: it keeps its vote
// until C6 removes it, and rule 1 promotes its replacement first (otherwise three voters plus
// non-voters could never shed a voter).
func countVoters(obs voterObservation) voterSet {
	var v voterSet
	for _, srv := range obs.Conf {
		if !srv.Voter {
			continue
		}
		v.total++
		m, ok := obs.Members[srv.ID]
		switch {
		case ok && m.Draining && m.Status != meta.MemberDead:
			v.draining++
		case srv.ID == obs.Self:
			v.alive++
		case !ok:
			v.alive++
			v.unrecorded = append(v.unrecorded, srv.ID)
		case m.Status == meta.MemberDead:
			v.dead = append(v.dead, srv.ID)
		default:
			v.alive++
			v.demotable = append(v.demotable, srv.ID)
		}
	}
	sort.Strings(v.dead)
	sort.Strings(v.demotable)
	sort.Strings(v.unrecorded)
	return v
}

// promotionCandidates returns the non-voters (by ID) worth probing: those whose record is
// alive and not draining, and only when a promotion can be wanted (fewer alive voters than
// MinVoters, or a dead voter to replace). Nil otherwise, so a settled cluster costs no RPC.
func promotionCandidates(obs voterObservation) []string {
	v := countVoters(obs)
	if v.alive >= obs.MinVoters && len(v.dead) == 0 {
		return nil
	}
	var out []string
	for _, srv := range obs.Conf {
		m, ok := obs.Members[srv.ID]
		if !srv.Voter && ok && m.Status == meta.MemberAlive && !m.Draining {
			out = append(out, srv.ID)
		}
	}
	sort.Strings(out)
	return out
}

// planVoters is C3's policy (docs/cluster.md, Voters, the leader and what a failure does). A
// non-voter is eligible when it is a promotionCandidate that reported caught up. Target = MinVoters when the alive voters plus
// the eligible non-voters number at least that, else 1. In order:
//  1. promote eligible non-voters (by ID) while alive voters < target;
//  2. for each dead voter (by ID): with an odd voter count, promote an eligible non-voter
//     first and then demote the dead voter (the count stays odd), or keep it when none is
//     eligible; with an even count, demote it if the alive voters still meet the target (the
//     count becomes odd); otherwise keep it;
//  3. an even voter count with more alive voters than the target: demote the highest-ID
//     non-leader voter that has an alive record.
//
// The leader is never demoted, and no dead voter is demoted unless the alive voters without
// it meet the target (its replacement exists).
func planVoters(obs voterObservation) voterPlan {
	v := countVoters(obs)
	var eligible []string
	for _, id := range promotionCandidates(obs) {
		if obs.CaughtUp[id] {
			eligible = append(eligible, id)
		}
	}
	p := voterPlan{Target: 1}
	if v.alive+len(eligible) >= obs.MinVoters {
		p.Target = obs.MinVoters
	}
	for _, id := range v.unrecorded {
		p.add(actLeaveUnrecorded, id, reasonNoRecord, v.total)
	}
	promote := func(reason string) {
		v.total++
		v.alive++
		p.add(actPromote, eligible[0], reason, v.total)
		eligible = eligible[1:]
	}
	for v.alive < p.Target && len(eligible) > 0 { // 1
		promote(reasonBelowTarget)
	}
	for _, id := range v.dead { // 2
		if v.total%2 == 1 {
			if len(eligible) == 0 {
				p.add(actKeepDead, id, reasonNoReplacement, v.total)
				continue
			}
			promote(reasonReplaceDead)
		}
		if v.alive < p.Target {
			continue // unreachable after rule 1, kept as the guard it documents
		}
		v.total--
		p.add(actDemote, id, reasonDead, v.total)
	}
	if v.total%2 == 0 && v.alive > p.Target && len(v.demotable) > 0 { // 3
		v.total--
		p.add(actDemote, v.demotable[len(v.demotable)-1], reasonExcess, v.total)
	}
	return p
}

func (p *voterPlan) add(kind voterActionKind, id, reason string, voters int) {
	p.Actions = append(p.Actions, voterAction{Kind: kind, ID: id, Reason: reason, Voters: voters})
}

// applyVoterPlan carries out p in order through the metastore, logging and auditing each
// membership change; it stops at the first change that fails.
func (c *Controller) applyVoterPlan(ctx context.Context, p voterPlan) error {
	for _, a := range p.Actions {
		var err error
		switch a.Kind {
		case actPromote:
			err = c.promoteVoter(ctx, a, p.Target)
		case actDemote:
			err = c.demoteVoter(ctx, a)
		case actKeepDead:
			if c.noteOnce("dead-voter-kept/" + a.ID) {
				c.logger.Info("dead voter kept: no caught-up non-voter to replace it", "member", a.ID)
			}
		case actLeaveUnrecorded:
			if c.noteOnce("voter-without-record/" + a.ID) {
				c.logger.Info("voter has no member record; left alone", "member", a.ID)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) promoteVoter(ctx context.Context, a voterAction, target int) error {
	if err := c.store.AddVoter(ctx, a.ID, ""); err != nil {
		c.audit(ctx, "cluster.voter.promote", a.ID, err)
		return err
	}
	c.logger.Info("non-voter promoted to voter", "member", a.ID, "voters", a.Voters, "target", target)
	c.audit(ctx, "cluster.voter.promote", a.ID, nil, "voters", a.Voters)
	return nil
}

func (c *Controller) demoteVoter(ctx context.Context, a voterAction) error {
	if a.ID == c.cfg.NodeID {
		return nil // never the leader itself
	}
	if err := c.store.DemoteVoter(ctx, a.ID); err != nil {
		c.audit(ctx, "cluster.voter.demote", a.ID, err, "reason", a.Reason)
		return err
	}
	c.forgetNote("dead-voter-kept/" + a.ID)
	c.logger.Info("voter demoted", "member", a.ID, "reason", a.Reason, "voters", a.Voters)
	c.audit(ctx, "cluster.voter.demote", a.ID, nil, "reason", a.Reason, "voters", a.Voters)
	return nil
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
