package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"narad.dev/broker/internal/meta"
)

// leaderProbeTimeout bounds the members endpoint's check that the leader answers.
const leaderProbeTimeout = 2 * time.Second

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

// membersHandler serves GET /v1/cluster/members from this node's replica. Raft roles come from
// the Raft configuration this node knows; leader_reachable is a live NodeStatus call to the
// leader (true on the leader itself). Decommission evaluations arrive with decommission
// support; until then a reachable leader reports no blocking reasons.
func membersHandler(store *meta.Store, p peers) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaderID, leaderAddr := store.Leader()
		reachable := false
		switch {
		case leaderID == "":
		case store.IsLeader():
			reachable = true
		default:
			ctx, cancel := context.WithTimeout(r.Context(), leaderProbeTimeout)
			_, err := p.NodeStatus(ctx, leaderAddr)
			cancel()
			reachable = err == nil
		}
		owned := map[string]int{}
		outbound := map[string]int{}
		for _, a := range store.AllAssignments() {
			owned[a.Owner]++
			if a.Target != "" {
				outbound[a.Owner]++
			}
		}
		out := memberListJSON{Members: []memberJSON{}, LeaderReachable: reachable, Leader: leaderID}
		for _, m := range store.Members() {
			status := "alive"
			switch {
			case m.Status == meta.MemberDead:
				status = "dead"
			case m.Draining:
				status = "draining"
			}
			mj := memberJSON{ID: m.ID, Addr: m.Addr, ClusterAddr: m.ClusterAddr, Status: status, Draining: m.Draining,
				RaftRole: store.RaftRole(m.ID), Leader: m.ID == leaderID, OwnedPartitions: owned[m.ID],
				OutboundMoves: outbound[m.ID], LastHeartbeat: m.LastHeartbeat}
			if reachable {
				mj.DecommissionBlocked = []string{}
			}
			out.Members = append(out.Members, mj)
		}
		sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
