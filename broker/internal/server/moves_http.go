package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// Bounds of the cluster endpoints.
const (
	moveDetailTimeout  = 2 * time.Second  // every op 30 of one GET /v1/cluster/moves?detail=true
	moveDetailParallel = 16               // op 30 calls in flight at once
	clusterWriteWait   = 15 * time.Second // an abort's CAS + leader read back; a decommission
)

// clusterStore is the metastore surface the cluster endpoints read and propose through,
// implemented by *meta.Store (proposals on a follower forward to the leader by themselves).
type clusterStore interface {
	NodeID() string
	IsLeader() bool
	Leader() (id, addr string)
	Members() []meta.Member
	RaftRole(id string) string
	Topic(name string) (meta.Topic, bool)
	Assignment(topic string, partition int) (meta.Assignment, bool)
	AllAssignments() []meta.Assignment
	AbortMove(ctx context.Context, topic string, p int, expectedTarget string) (meta.CASResult, meta.Assignment, error)
	ConfirmAssignment(ctx context.Context, topic string, partition int) (meta.Assignment, bool, error)
}

// clusterPeers is the node RPC the cluster endpoints use, implemented by peers.
type clusterPeers interface {
	NodeStatus(ctx context.Context, addr string) (*nodepb.NodeStatusReply, error)
	DecommissionMember(ctx context.Context, leaderAddr string, c noderpc.DecomCall) (noderpc.DecomResult, error)
	MoveReport(ctx context.Context, addr, topic string, partition int) (transfer.Report, error)
}

var (
	_ clusterStore = (*meta.Store)(nil)
	_ clusterPeers = noderpc.Peers{}
)

// clusterHTTP serves the /v1/cluster endpoints (spec/api.md §2.16–§2.19). Reads come from
// this node's replica; writes go to the leader (proposals forward; decommission is op 25).
type clusterHTTP struct {
	store clusterStore
	peers clusterPeers
	mv    noderpc.MoveDeps
	log   *slog.Logger
	audit *audit.Logger // nil → discard
	// callerOf returns the authenticated caller (api.CallerFromContext when nil).
	callerOf func(*http.Request) *meta.User
}

// clusterRoutes returns the cluster endpoints for api.Options.Routes.
func clusterRoutes(c *clusterHTTP) map[string]http.Handler {
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.callerOf == nil {
		c.callerOf = func(r *http.Request) *meta.User { return api.CallerFromContext(r.Context()) }
	}
	if c.audit == nil {
		c.audit = audit.New(c.log, c.store.NodeID())
	}
	return map[string]http.Handler{
		"GET /v1/cluster/members":                          http.HandlerFunc(c.members),
		"POST /v1/cluster/members/{id}/decommission":       http.HandlerFunc(c.decommission),
		"DELETE /v1/cluster/members/{id}/decommission":     http.HandlerFunc(c.decommission),
		"GET /v1/cluster/moves":                            http.HandlerFunc(c.moves),
		"POST /v1/cluster/moves/{topic}/{partition}/abort": http.HandlerFunc(c.abortMove),
	}
}

// writeJSON writes v as one JSON value and a newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes the §1.5 error body {"error": msg} plus fields.
func writeError(w http.ResponseWriter, status int, msg string, fields map[string]any) {
	body := map[string]any{"error": msg}
	for k, v := range fields {
		body[k] = v
	}
	writeJSON(w, status, body)
}

// requireAdmin answers 403 unless the caller holds admin (or is root; anyone with security
// off, where the caller is the synthetic root admin).
func (c *clusterHTTP) requireAdmin(w http.ResponseWriter, r *http.Request) (*meta.User, bool) {
	u := c.callerOf(r)
	if !auth.IsAdmin(u) {
		writeError(w, http.StatusForbidden, "admin required", nil)
		return nil, false
	}
	return u, true
}

// requireAdminAudited is requireAdmin that audits a refusal as event on target.
func (c *clusterHTTP) requireAdminAudited(w http.ResponseWriter, r *http.Request, event, target string) (*meta.User, bool) {
	if u := c.callerOf(r); !auth.IsAdmin(u) {
		c.record(r, event, u, target, audit.Denied, "reason", "admin required")
	}
	return c.requireAdmin(w, r)
}

// record writes one audit record of the caller u (docs/operating.md, Audit events).
func (c *clusterHTTP) record(r *http.Request, event string, u *meta.User, target, outcome string, attrs ...any) {
	actor := ""
	if u != nil {
		actor = u.Username
		if actor == "" && u.Root {
			actor = audit.ActorSecurityOff // the synthetic caller of a node with security off
		}
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	c.audit.Record(r.Context(), audit.Event{Name: event, Actor: actor, Target: target, Outcome: outcome,
		Attrs: append([]any{"client", client}, attrs...)})
}

// Audit events of the cluster endpoints (docs/operating.md, Audit events).
const (
	eventDecommission       = "cluster.decommission"
	eventDecommissionCancel = "cluster.decommission.cancel"
	eventMoveAbort          = "cluster.move.abort"
)

// flagParam parses an optional boolean query parameter: absent or "false" → false, "true" →
// true, anything else (or given twice) → error.
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
	return false, fmt.Errorf("query parameter %q must be true or false", key)
}

// moveJSON is one entry of GET /v1/cluster/moves (spec/api.md §2.18).
type moveJSON struct {
	Topic       string           `json:"topic"`
	Partition   int              `json:"partition"`
	From        string           `json:"from"`
	To          string           `json:"to"`
	FromStatus  string           `json:"from_status"`
	ToStatus    string           `json:"to_status"`
	Blocked     []string         `json:"blocked"`
	Detail      *transfer.Report `json:"detail,omitempty"`
	DetailError string           `json:"detail_error,omitempty"`
}

// Reasons a move is blocked (spec/api.md §2.18).
const (
	blockedSourceDead      = "source_dead"
	blockedTargetDead      = "target_dead"
	blockedTargetNotMember = "target_not_member"
)

// moves serves GET /v1/cluster/moves[?detail=true] from this node's replica: every
// assignment with a target, sorted by topic then partition.
func (c *clusterHTTP) moves(w http.ResponseWriter, r *http.Request) {
	detail, err := flagParam(r.URL.Query(), "detail")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	members := map[string]meta.Member{}
	for _, m := range c.store.Members() {
		members[m.ID] = m
	}
	statusOf := func(id string) string {
		if m, ok := members[id]; ok {
			return memberStatus(m)
		}
		return statusNotMember
	}
	out := []moveJSON{}
	for _, a := range c.store.AllAssignments() {
		if a.Target == "" {
			continue
		}
		mv := moveJSON{Topic: a.Topic, Partition: a.Partition, From: a.Owner, To: a.Target,
			FromStatus: statusOf(a.Owner), ToStatus: statusOf(a.Target), Blocked: []string{}}
		if mv.FromStatus == statusDead || mv.FromStatus == statusNotMember {
			mv.Blocked = append(mv.Blocked, blockedSourceDead)
		}
		switch mv.ToStatus {
		case statusDead:
			mv.Blocked = append(mv.Blocked, blockedTargetDead)
		case statusNotMember:
			mv.Blocked = append(mv.Blocked, blockedTargetNotMember)
		}
		out = append(out, mv)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	if detail {
		c.addDetails(r.Context(), out, members)
	}
	writeJSON(w, http.StatusOK, map[string]any{"moves": out})
}

// addDetails asks each move's destination for its report (op 30), moveDetailParallel at once
// and all within moveDetailTimeout; a destination that cannot be asked sets detail_error.
func (c *clusterHTTP) addDetails(ctx context.Context, out []moveJSON, members map[string]meta.Member) {
	ctx, cancel := context.WithTimeout(ctx, moveDetailTimeout)
	defer cancel()
	sem := make(chan struct{}, moveDetailParallel)
	var wg sync.WaitGroup
	for i := range out {
		mv := &out[i]
		if mv.To == c.store.NodeID() {
			c.localDetail(mv)
			continue
		}
		m, ok := members[mv.To]
		if !ok || m.ClusterAddr == "" {
			mv.DetailError = "the destination is not a member"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				mv.DetailError = "the destination could not be asked in time"
				return
			}
			rep, err := c.peers.MoveReport(ctx, m.ClusterAddr, mv.Topic, mv.Partition)
			switch {
			case errors.Is(err, api.ErrNotFound):
				mv.DetailError = "the destination runs no worker for this move"
			case err != nil:
				mv.DetailError = err.Error()
			default:
				mv.Detail = &rep
			}
		}()
	}
	wg.Wait()
}

// localDetail fills the detail of a move this node is the destination of.
func (c *clusterHTTP) localDetail(mv *moveJSON) {
	if c.mv.Reporter == nil {
		mv.DetailError = noderpc.ErrMoveUnwired.Error()
		return
	}
	rep, ok := c.mv.Reporter.Report(mv.Topic, mv.Partition)
	if !ok {
		mv.DetailError = "the destination runs no worker for this move"
		return
	}
	mv.Detail = &rep
}

// abortMove serves POST /v1/cluster/moves/{topic}/{partition}/abort[?target=] with the
// algorithm of spec/api.md §2.19: read, CAS-clear the target read, read back from the leader;
// 202 only if the owner is unchanged and the move to that target is gone.
func (c *clusterHTTP) abortMove(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	u, ok := c.requireAdminAudited(w, r, eventMoveAbort, topic+"/"+r.PathValue("partition"))
	if !ok {
		return
	}
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "partition must be a non-negative integer", nil)
		return
	}
	part := int(p)
	moveTarget := topic + "/" + strconv.Itoa(part)
	q := r.URL.Query()
	if len(q["target"]) > 1 {
		writeError(w, http.StatusBadRequest, `query parameter "target" given more than once`, nil)
		return
	}
	want := q.Get("target")

	// 1. Read the assignment from this node's replica.
	t, ok := c.store.Topic(topic)
	if !ok || part >= t.Partitions {
		writeError(w, http.StatusNotFound, "no such topic or partition", nil)
		return
	}
	a, ok := c.store.Assignment(topic, part)
	if !ok {
		writeError(w, http.StatusNotFound, "no such topic or partition", nil)
		return
	}
	owner, target := a.Owner, a.Target
	if target == "" {
		writeError(w, http.StatusConflict, "no move in flight", map[string]any{"owner": owner, "target": ""})
		return
	}
	if want != "" && want != target {
		writeError(w, http.StatusConflict, "the move targets another node", map[string]any{"owner": owner, "target": target})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), clusterWriteWait)
	defer cancel()
	unknown := func(step string, err error) {
		c.record(r, eventMoveAbort, u, moveTarget, audit.Unknown, "owner", owner, "destination", target, "err", err)
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("abort outcome unknown (%s): %v", step, err), nil)
	}

	// 2. Compare-and-set: clear the target only if it still names the target read.
	res, _, err := c.store.AbortMove(ctx, topic, part, target)
	switch {
	case res == meta.CASNotFound:
		writeError(w, http.StatusNotFound, "no such topic or partition", nil)
		return
	case res == 0:
		if err == nil {
			err = errors.New("no verdict")
		}
		unknown("propose", err)
		return
	}

	// 3. Read back from the leader: the CAS was a no-op if the leader's state had moved on.
	la, found, err := c.store.ConfirmAssignment(ctx, topic, part)
	if err != nil {
		unknown("leader read back", err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, "no such topic or partition", nil)
		return
	}

	// 4. Owner unchanged and no move to the target any more: the abort took effect.
	if la.Owner == owner && la.Target != target {
		c.record(r, eventMoveAbort, u, moveTarget, audit.OK, "owner", owner, "destination", target)
		writeJSON(w, http.StatusAccepted, map[string]any{"topic": topic, "partition": part, "owner": owner, "aborted_target": target})
		return
	}
	// 5. Otherwise the leader's owner and target.
	msg := "the move still targets " + la.Target
	if la.Owner != owner {
		msg = "the partition's owner changed to " + la.Owner + " (the move completed first)"
	}
	writeError(w, http.StatusConflict, msg, map[string]any{"owner": la.Owner, "target": la.Target})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
