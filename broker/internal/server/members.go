package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
)

// leaderProbeTimeout bounds the members endpoint's questions to the leader.
const leaderProbeTimeout = 2 * time.Second

// Member statuses of the cluster endpoints (spec/api.md §2.16, §2.18).
const (
	statusAlive     = "alive"
	statusDead      = "dead"
	statusDraining  = "draining"
	statusNotMember = "not_a_member"
	// statusRemoved is a decommissioned member: out of the Raft configuration, draining and
	// owning nothing. Its record is garbage-collected once it has been dead for
	// controller.DefaultRemoveDeadAfter (1 h); one that keeps running stays listed.
	statusRemoved = "removed"
)

// memberJSON is one entry of GET /v1/cluster/members (spec/api.md §2.16).
type memberJSON struct {
	ID                  string   `json:"id"`
	Addr                string   `json:"addr"`
	ClusterAddr         string   `json:"cluster_addr"`
	Status              string   `json:"status"`
	Draining            bool     `json:"draining"`
	RaftRole            string   `json:"raft_role"`
	Leader              bool     `json:"leader"`
	OwnedPartitions     int      `json:"owned_partitions"`
	OutboundMoves       int      `json:"outbound_moves"`
	LastHeartbeat       int64    `json:"last_heartbeat"`
	DecommissionBlocked []string `json:"decommission_blocked,omitzero"`
}

type memberListJSON struct {
	Members         []memberJSON `json:"members"`
	LeaderReachable bool         `json:"leader_reachable"`
	Leader          string       `json:"leader,omitempty"`
}

// memberStatus is a member's status as the cluster endpoints show it: dead when its
// heartbeats stopped (even if draining), else draining when flagged, else alive.
func memberStatus(m meta.Member) string {
	switch {
	case m.Status == meta.MemberDead:
		return statusDead
	case m.Draining:
		return statusDraining
	}
	return statusAlive
}

// decommissioned reports whether a member's decommission has finished: it is flagged
// draining, out of the Raft configuration, owns no partition and receives none. Such a
// member is listed as "removed" rather than dead or draining (docs/cluster.md, Removing a node).
func decommissioned(m meta.Member, raftRole string, owned int, targeted bool) bool {
	return m.Draining && raftRole == meta.RaftNone && owned == 0 && !targeted
}

// members serves GET /v1/cluster/members from this node's replica. Raft roles come from the
// Raft configuration this node knows; decommission_blocked is the leader's current evaluation
// (the decommissioner on the leader itself, op 25 blocked_only elsewhere). When the leader
// cannot be reached, leader_reachable is false and decommission_blocked is omitted.
func (c *clusterHTTP) members(w http.ResponseWriter, r *http.Request) {
	reachable, blocked := c.leaderBlocked(r.Context())
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
	out := memberListJSON{Members: []memberJSON{}, LeaderReachable: reachable, Leader: leaderID}
	for _, m := range c.store.Members() {
		role := c.store.RaftRole(m.ID)
		status := memberStatus(m)
		if decommissioned(m, role, owned[m.ID], targeted[m.ID]) {
			status = statusRemoved
		}
		mj := memberJSON{ID: m.ID, Addr: m.Addr, ClusterAddr: m.ClusterAddr, Status: status, Draining: m.Draining,
			RaftRole: role, Leader: m.ID == leaderID, OwnedPartitions: owned[m.ID],
			OutboundMoves: outbound[m.ID], LastHeartbeat: m.LastHeartbeat}
		if reachable {
			mj.DecommissionBlocked = append([]string{}, blocked[m.ID]...)
		}
		out.Members = append(out.Members, mj)
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
	writeJSON(w, http.StatusOK, out)
}

// leaderBlocked asks the leader for its decommission evaluation. reachable is false when no
// leader is known or it could not be asked; a leader that answers but has no evaluation (an
// older release, or none wired) is probed with NodeStatus and reports no reasons.
func (c *clusterHTTP) leaderBlocked(ctx context.Context) (reachable bool, blocked map[string][]string) {
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

// decommission serves POST (start, ?dry_run=true) and DELETE (cancel)
// /v1/cluster/members/{id}/decommission (spec/api.md §2.17), on the leader directly or
// through op 25 elsewhere.
func (c *clusterHTTP) decommission(w http.ResponseWriter, r *http.Request) {
	call := noderpc.DecomCall{ID: r.PathValue("id"), Cancel: r.Method == http.MethodDelete}
	event := eventDecommission
	if call.Cancel {
		event = eventDecommissionCancel
	}
	u, ok := c.requireAdminAudited(w, r, event, call.ID)
	if !ok {
		return
	}
	if !call.Cancel {
		dry, err := flagParam(r.URL.Query(), "dry_run")
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), nil)
			return
		}
		call.DryRun = dry
	}
	ctx, cancel := context.WithTimeout(r.Context(), clusterWriteWait)
	defer cancel()
	res := c.decommissionOnLeader(ctx, call)
	switch res.Status {
	case http.StatusOK:
		if call.DryRun {
			writeJSON(w, http.StatusOK, map[string]any{"node": res.Verdict.Node, "dry_run": true,
				"allowed": res.Verdict.Allowed, "reasons": nonNil(res.Verdict.Reasons), "moves": plannedMoves(res.Verdict.Moves)})
			return
		}
		fallthrough // a leader answering 200 to a real decommission: done
	case http.StatusNoContent:
		c.record(r, event, u, call.ID, audit.OK)
		w.WriteHeader(http.StatusNoContent)
	case http.StatusBadRequest, http.StatusNotFound:
		writeError(w, int(res.Status), res.Error, nil)
	case http.StatusConflict:
		if call.Cancel {
			writeError(w, http.StatusConflict, res.Error, nil)
			return
		}
		writeError(w, http.StatusConflict, res.Error, map[string]any{"node": call.ID, "reasons": nonNil(res.Verdict.Reasons)})
	default: // 421 (leadership moved), 503, anything unexpected: retryable
		if !call.DryRun {
			c.record(r, event, u, call.ID, audit.Unknown, "err", res.Error)
		}
		writeError(w, http.StatusServiceUnavailable, res.Error, nil)
	}
}

// decommissionOnLeader runs call with the decommissioner when this node leads, else asks
// the leader with op 25. Failures to reach a leader come back as 503.
func (c *clusterHTTP) decommissionOnLeader(ctx context.Context, call noderpc.DecomCall) noderpc.DecomResult {
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

// plannedMoves is never nil, so a dry run always carries a "moves" list.
func plannedMoves(ms []controller.PlannedMove) []controller.PlannedMove {
	if ms == nil {
		return []controller.PlannedMove{}
	}
	return ms
}
