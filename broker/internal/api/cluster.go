package api

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/controller"
)

// Audit events of the cluster endpoints (docs/operating.md, Audit events).
const (
	eventDecommission       = "cluster.decommission"
	eventDecommissionCancel = "cluster.decommission.cancel"
	eventMoveAbort          = "cluster.move.abort"
)

// Op names of the cluster endpoints (the 500 text "<op> failed").
const (
	opMembers      = "list members"
	opMoves        = "list moves"
	opAbortMove    = "abort move"
	opDecommission = "decommission"
)

// clusterRoutes registers the /v1/cluster endpoints, served by Options.Cluster.
func (s *server) clusterRoutes(m *routeTable) {
	m.HandleFunc("GET /v1/cluster/members", s.members)
	m.HandleFunc("POST /v1/cluster/members/{id}/decommission", s.decommission)
	m.HandleFunc("DELETE /v1/cluster/members/{id}/decommission", s.decommission)
	m.HandleFunc("GET /v1/cluster/moves", s.moves)
	m.HandleFunc("POST /v1/cluster/moves/{topic}/{partition}/abort", s.abortMove)
	m.HandleFunc("GET /v1/cluster/partitions", s.partitions)
	m.HandleFunc("POST /v1/cluster/elect-leaders", s.electLeaders) // cluster_elect.go
}

// members is GET /v1/cluster/members → 200 MemberList.
func (s *server) members(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cluster.Members(r.Context()))
}

// moves is GET /v1/cluster/moves[?detail=true]: detail flag (400) → 200 {"moves": [...]}.
func (s *server) moves(w http.ResponseWriter, r *http.Request) {
	detail, err := flagParam(r.URL.Query(), "detail")
	if err != nil {
		s.writeErr(w, r, opMoves, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"moves": s.cluster.Moves(r.Context(), detail)})
}

// abortMove is POST /v1/cluster/moves/{topic}/{partition}/abort[?target=]: admin (403) →
// partition and target (400) → ClusterBackend.AbortMove (404/409/503) → 202. A done abort and
// one of unknown outcome are audited.
func (s *server) abortMove(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if _, ok := s.requireAdminAudited(w, r, opAbortMove, eventMoveAbort, topic+"/"+r.PathValue("partition")); !ok {
		return
	}
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || p < 0 {
		s.writeErr(w, r, opAbortMove, invalidf("partition must be a non-negative integer"))
		return
	}
	part := int(p)
	q := r.URL.Query()
	if len(q["target"]) > 1 {
		s.writeErr(w, r, opAbortMove, invalidf(`query parameter "target" given more than once`))
		return
	}
	moveTarget := topic + "/" + strconv.Itoa(part)
	mv, err := s.cluster.AbortMove(r.Context(), topic, part, q.Get("target"))
	if err != nil {
		if ue := (*AbortUnknownError)(nil); errors.As(err, &ue) {
			s.audit(r, eventMoveAbort, moveTarget, audit.Unknown, "owner", ue.Owner, "destination", ue.Target, "err", ue.Err)
		}
		s.writeErr(w, r, opAbortMove, err)
		return
	}
	s.audit(r, eventMoveAbort, moveTarget, audit.OK, "owner", mv.Owner, "destination", mv.Target)
	writeJSON(w, http.StatusAccepted, map[string]any{"topic": mv.Topic, "partition": mv.Partition,
		"owner": mv.Owner, "aborted_target": mv.Target})
}

// decommission is POST (start, ?dry_run=true, or forced with a body {"force": true, "lose":
// [...]}) and DELETE (cancel) /v1/cluster/members/{id}/decommission: admin (403) → dry_run
// flag (400) → body (413/400; force with dry_run 400) → ClusterBackend.Decommission
// (400/404/409/503) → 200 dry-run verdict, 200 forced {"node", "forced", "lost"}, or 204. A
// change made and one of unknown outcome are audited (a forced one as
// cluster.decommission.force, refused ones too).
func (s *server) decommission(w http.ResponseWriter, r *http.Request) {
	req := DecommissionRequest{ID: r.PathValue("id"), Cancel: r.Method == http.MethodDelete}
	event := eventDecommission
	if req.Cancel {
		event = eventDecommissionCancel
	}
	if _, ok := s.requireAdminAudited(w, r, opDecommission, event, req.ID); !ok {
		return
	}
	if !req.Cancel {
		dry, err := flagParam(r.URL.Query(), "dry_run")
		if err == nil {
			req.DryRun = dry
			err = s.decommissionBody(r, &req)
		}
		if err != nil {
			s.writeErr(w, r, opDecommission, err)
			return
		}
	}
	if req.Force != nil {
		s.decommissionForce(w, r, req)
		return
	}
	res, err := s.cluster.Decommission(r.Context(), req)
	switch {
	case err != nil:
		if !req.DryRun && statusOf(err) == http.StatusServiceUnavailable {
			s.audit(r, event, req.ID, audit.Unknown, "err", err.Error())
		}
		s.writeErr(w, r, opDecommission, err)
	case res.Evaluated:
		v := res.Verdict
		writeJSON(w, http.StatusOK, map[string]any{"node": v.Node, "dry_run": true,
			"allowed": v.Allowed, "reasons": nonNilStrings(v.Reasons), "moves": plannedMoves(v.Moves)})
	default:
		s.audit(r, event, req.ID, audit.OK)
		writeEmpty(w, http.StatusNoContent)
	}
}

// decommissionBody reads POST …/decommission's optional body into req (parseDecommissionBody);
// force with dry_run is 400.
func (s *server) decommissionBody(r *http.Request, req *DecommissionRequest) error {
	b, err := readBody(r, maxJSONBody)
	if err != nil {
		return err
	}
	if req.Force, err = parseDecommissionBody(b); err != nil {
		return err
	}
	if req.Force != nil && req.DryRun {
		return invalidf("force and dry_run cannot be combined")
	}
	return nil
}

// decommissionForce runs a forced decommission and answers 200 with exactly the partitions
// given up. Every outcome is audited as cluster.decommission.force: a refusal (409) as
// denied, a 503 as unknown.
func (s *server) decommissionForce(w http.ResponseWriter, r *http.Request, req DecommissionRequest) {
	res, err := s.cluster.Decommission(r.Context(), req)
	if err != nil {
		outcome := audit.Denied
		if statusOf(err) == http.StatusServiceUnavailable {
			outcome = audit.Unknown
		}
		s.audit(r, eventDecommissionForce, req.ID, outcome, "named", len(req.Force.Lose), "err", err.Error())
		s.writeErr(w, r, opDecommission, err)
		return
	}
	lost := lostPartitions(res.Verdict.Lost)
	s.audit(r, eventDecommissionForce, req.ID, audit.OK, "lost", len(lost))
	writeJSON(w, http.StatusOK, map[string]any{"node": req.ID, "forced": true, "lost": lost})
}

// flagParam parses an optional boolean query parameter: absent or "false" → false, "true" →
// true, anything else (or given twice) → 400.
func flagParam(q url.Values, key string) (bool, error) {
	vs, ok := q[key]
	switch {
	case !ok:
		return false, nil
	case len(vs) == 1 && vs[0] == "true":
		return true, nil
	case len(vs) == 1 && vs[0] == "false":
		return false, nil
	}
	return false, invalidf("query parameter %q must be true or false", key)
}

// nonNilStrings is never nil, so a list field is [] rather than null.
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// plannedMoves is never nil, so a dry run always carries a "moves" list.
func plannedMoves(ms []controller.PlannedMove) []controller.PlannedMove {
	if ms == nil {
		return []controller.PlannedMove{}
	}
	return ms
}
