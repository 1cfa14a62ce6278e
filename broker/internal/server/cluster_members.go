package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
)

// leaderProbeTimeout bounds the members endpoint's questions to the leader.
const leaderProbeTimeout = 2 * time.Second

// memberStatus is a member's status as the cluster endpoints show it: dead when its
// heartbeats stopped (even if draining), else draining when flagged, else alive.
func memberStatus(m meta.Member) string {
	switch {
	case m.Status == meta.MemberDead:
		return api.MemberDead
	case m.Draining:
		return api.MemberDraining
	}
	return api.MemberAlive
}

// decommissioned reports whether a member's decommission has finished: it is flagged
// draining, out of the Raft configuration, owns no partition and receives none. Such a
// member is listed as "removed" rather than dead or draining (docs/cluster.md, Removing a node).
func decommissioned(m meta.Member, raftRole string, owned int, targeted bool) bool {
	return m.Draining && raftRole == meta.RaftNone && owned == 0 && !targeted
}

// Members lists the members from this node's replica. Raft roles come from the Raft
// configuration this node knows; decommission_blocked is the leader's current evaluation
// (the decommissioner on the leader itself, op 25 blocked_only elsewhere). When the leader
// cannot be reached, LeaderReachable is false and DecommissionBlocked is omitted.
func (c *clusterService) Members(ctx context.Context) api.MemberList {
	reachable, blocked := c.leaderBlocked(ctx)
	leaderID, _ := c.store.Leader()
	owned := map[string]int{}
	outbound := map[string]int{}
	targeted := map[string]bool{}
	for _, a := range c.store.AllAssignments() {
		owned[a.Owner]++
		if a.Target != "" {
			outbound[a.Owner]++
			targeted[a.Target] = true
		}
	}
	out := api.MemberList{Members: []api.Member{}, LeaderReachable: reachable, Leader: leaderID}
	for _, m := range c.store.Members() {
		role := c.store.RaftRole(m.ID)
		status := memberStatus(m)
		if decommissioned(m, role, owned[m.ID], targeted[m.ID]) {
			status = api.MemberRemoved
		}
		mj := api.Member{ID: m.ID, Addr: m.Addr, ClusterAddr: m.ClusterAddr, Status: status, Draining: m.Draining,
			RaftRole: role, Leader: m.ID == leaderID, OwnedPartitions: owned[m.ID],
			OutboundMoves: outbound[m.ID], LastHeartbeat: m.LastHeartbeat, Rack: m.Rack}
		if reachable {
			mj.DecommissionBlocked = append([]string{}, blocked[m.ID]...)
		}
		out.Members = append(out.Members, mj)
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
	return out
}

// leaderBlocked asks the leader for its decommission evaluation. reachable is false when no
// leader is known or it could not be asked; a leader that answers but has no evaluation (an
// older release, or none wired) is probed with NodeStatus and reports no reasons.
func (c *clusterService) leaderBlocked(ctx context.Context) (reachable bool, blocked map[string][]string) {
	leaderID, leaderAddr := c.store.Leader()
	switch {
	case leaderID == "":
		return false, nil
	case c.store.IsLeader():
		if c.mv.Decom != nil {
			blocked = c.mv.Decom.DecommissionBlocked()
		}
		return true, blocked
	}
	ctx, cancel := context.WithTimeout(ctx, leaderProbeTimeout)
	defer cancel()
	res, err := c.peers.DecommissionMember(ctx, leaderAddr, noderpc.DecomCall{BlockedOnly: true})
	switch {
	case err == nil && res.Status == http.StatusOK:
		return true, res.Blocked
	case err == nil && res.Status == http.StatusMisdirectedRequest: // leadership moved
		return false, nil
	case err != nil && !errors.Is(err, noderpc.ErrPeerTooOld):
		return false, nil
	}
	_, err = c.peers.NodeStatus(ctx, leaderAddr)
	return err == nil, nil
}

// Decommission starts (or dry-runs) or cancels a member's decommission (docs/internals/http-api.md §2.17),
// on the leader directly or through op 25 elsewhere, and maps the leader's answer: 200/204
// succeed, 400/404/409 are refusals, anything else (421 leadership moved, 503) is retryable.
func (c *clusterService) Decommission(ctx context.Context, req api.DecommissionRequest) (api.DecommissionResult, error) {
	call := noderpc.DecomCall{ID: req.ID, Cancel: req.Cancel, DryRun: req.DryRun}
	if req.Force != nil {
		call.Force, call.Lose = true, req.Force.Lose
	}
	ctx, cancel := context.WithTimeout(ctx, clusterWriteWait)
	defer cancel()
	res := c.decommissionOnLeader(ctx, call)
	switch res.Status {
	case http.StatusOK:
		if call.DryRun {
			return api.DecommissionResult{Evaluated: true, Verdict: res.Verdict}, nil
		}
		if call.Force {
			return api.DecommissionResult{Forced: true, Verdict: res.Verdict}, nil
		}
		return api.DecommissionResult{}, nil // a leader answering 200 to a real decommission: done
	case http.StatusNoContent:
		return api.DecommissionResult{}, nil
	case http.StatusBadRequest:
		return api.DecommissionResult{}, &api.ClusterError{Kind: api.ErrInvalid, Msg: res.Error}
	case http.StatusNotFound:
		return api.DecommissionResult{}, &api.ClusterError{Kind: api.ErrNotFound, Msg: res.Error}
	case http.StatusConflict:
		if call.Cancel {
			return api.DecommissionResult{}, &api.ClusterError{Kind: api.ErrConflict, Msg: res.Error}
		}
		reasons := res.Verdict.Reasons
		if reasons == nil {
			reasons = []string{}
		}
		fields := map[string]any{"node": call.ID, "reasons": reasons}
		if len(res.Verdict.Missing) > 0 {
			fields["missing"] = res.Verdict.Missing
		}
		if len(res.Verdict.Lost) > 0 { // a forced decommission stopped part-way: given up so far
			fields["lost"] = res.Verdict.Lost
		}
		return api.DecommissionResult{}, &api.ClusterError{Kind: api.ErrConflict, Msg: res.Error, Fields: fields}
	}
	return api.DecommissionResult{}, &api.ClusterError{Kind: api.ErrUnavailable, Msg: res.Error}
}

// decommissionOnLeader runs call with the decommissioner when this node leads, else asks
// the leader with op 25. Failures to reach a leader come back as 503.
func (c *clusterService) decommissionOnLeader(ctx context.Context, call noderpc.DecomCall) noderpc.DecomResult {
	if c.store.IsLeader() {
		return noderpc.RunDecommission(ctx, c.mv, call)
	}
	id, addr := c.store.Leader()
	if id == "" {
		return noderpc.DecomResult{Status: http.StatusServiceUnavailable, Error: meta.ErrNoLeader.Error()}
	}
	res, err := c.peers.DecommissionMember(ctx, addr, call)
	if err != nil {
		return noderpc.DecomResult{Status: http.StatusServiceUnavailable, Error: err.Error()}
	}
	if res.Error == "" && res.Status >= 400 {
		res.Error = fmt.Sprintf("leader answered %d", res.Status)
	}
	return res
}
