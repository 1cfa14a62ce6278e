// Package brokertest is an in-memory stand-in for a Narad cluster's admin API, for controller
// tests that need brokers answering in a chosen way (a refusal, a drain that never ends). The
// end-to-end suite runs real brokers instead.
package brokertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	"narad.dev/broker/client"
)

// Cluster is the state the fake serves. Tests change it under Update.
type Cluster struct {
	Members []client.Member
	Leader  string
	Moves   []client.Move
	Topics  []client.TopicDetail
	// Refuse maps a node ID to the reason codes a decommission of it is refused with (409).
	Refuse map[string][]string
	// RefuseOnStart maps a node ID to reason codes only the real decommission (not the dry
	// run) is refused with (409): the cluster changed between the two calls.
	RefuseOnStart map[string][]string
	// PlannedMoves maps a node ID to the moves a dry run of its decommission reports.
	PlannedMoves map[string][]client.PlannedMove
	// NotReady makes /readyz answer 503.
	NotReady bool
	// Partitions is the cluster's partition list, served by GET /v1/cluster/partitions in one
	// page (with ?under_replicated=true only those marked under-replicated);
	// POST /v1/cluster/elect-leaders answers 200 with no election.
	Partitions []client.PartitionReplicas
	// NoReplicationAPI makes both endpoints answer 404, like a broker without replication.
	NoReplicationAPI bool
	// Users are served by the /v1/users routes (users.go); New adds the root admin.
	Users []User
	// NoQuorum makes every user change (create, grants, password, delete) answer 503, as
	// brokers without a Raft quorum do; reads still answer.
	NoQuorum bool
}

// Call is one request the fake received.
type Call struct {
	Method, Path, Query string
}

// Fake is a running fake admin API. Every request must carry the Basic credentials given to
// New; others get 401.
type Fake struct {
	Server *httptest.Server
	user   string
	pass   string

	mu    sync.Mutex
	state Cluster
	calls []Call
}

// New starts a fake serving state, checking Basic auth user/pass.
func New(state Cluster, user, pass string) *Fake {
	f := &Fake{user: user, pass: pass, state: state}
	if f.userIndex(user) < 0 {
		f.state.Users = append(f.state.Users, User{User: client.User{Username: user, Root: true,
			Grants: []client.Grant{{Action: "admin"}}}, Password: pass})
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Close stops the server.
func (f *Fake) Close() { f.Server.Close() }

// URL is the base URL of the fake.
func (f *Fake) URL() string { return f.Server.URL }

// Update changes the served state.
func (f *Fake) Update(fn func(c *Cluster)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.state)
}

// State returns a copy of the served state's top level.
func (f *Fake) State() Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// Calls returns the requests received so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Member returns member id and whether it exists.
func (f *Fake) Member(id string) (client.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.state.Members {
		if m.ID == id {
			return m, true
		}
	}
	return client.Member{}, false
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})
	switch r.URL.Path {
	case "/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	case "/readyz":
		if f.state.NotReady {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "not ready"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != f.user || p != f.pass {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/members":
		ms := append([]client.Member(nil), f.state.Members...)
		sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
		writeJSON(w, http.StatusOK, client.MemberList{Members: ms, LeaderReachable: f.state.Leader != "", Leader: f.state.Leader})
	case r.Method == http.MethodPatch && len(parts) == 3 && parts[1] == "topics":
		f.alterTopic(w, r, parts[2])
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/moves":
		writeJSON(w, http.StatusOK, map[string]any{"moves": nonNilMoves(f.state.Moves)})
	case len(parts) == 5 && parts[1] == "cluster" && parts[2] == "members" && parts[4] == "decommission":
		f.decommission(w, r, parts[3])
	case r.URL.Path == "/v1/cluster/partitions" || r.URL.Path == "/v1/cluster/elect-leaders":
		f.replication(w, r)
	case len(parts) >= 2 && len(parts) <= 4 && parts[1] == "users":
		f.users(w, r, parts)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/topics":
		ts := make([]client.Topic, 0, len(f.state.Topics))
		for _, t := range f.state.Topics {
			ts = append(ts, t.Topic)
		}
		writeJSON(w, http.StatusOK, client.TopicList{Topics: ts})
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "topics":
		for _, t := range f.state.Topics {
			if t.Name == parts[2] {
				writeJSON(w, http.StatusOK, t)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "topic not found"})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not served by the fake: " + r.Method + " " + r.URL.Path})
	}
}

// alterTopic serves the replication fields of PATCH /v1/topics/{topic} (docs/replication.md,
// Settings): R changes only within 2 … 5 (409 otherwise), M at most the resulting R (400).
// Other fields are refused with 400: the fake does not model them.
func (f *Fake) alterTopic(w http.ResponseWriter, r *http.Request, name string) {
	var req client.AlterTopicRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON"})
		return
	}
	idx := -1
	for i := range f.state.Topics {
		if f.state.Topics[i].Name == name {
			idx = i
		}
	}
	if idx < 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "topic not found"})
		return
	}
	t := &f.state.Topics[idx].Topic
	rf, m := max(1, t.ReplicationFactor), t.MinInsyncReplicas
	if req.ReplicationFactor != nil {
		rf = *req.ReplicationFactor
	}
	if req.MinInsyncReplicas != nil {
		m = *req.MinInsyncReplicas
	}
	switch {
	case req.Partitions != nil || req.RetentionMs != nil || req.VisibilityTimeoutMs != nil ||
		req.MaxInFlightPerPartition != nil || req.MaxAckedAheadPerPartition != nil || len(req.Schema) > 0:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the fake alters replication settings only"})
	case (max(1, t.ReplicationFactor) == 1) != (rf == 1):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "replication_factor cannot change between 1 and 2 on a live topic: recreate the topic"})
	case m > rf:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "min_insync_replicas would exceed replication_factor", "field": "min_insync_replicas"})
	default:
		t.ReplicationFactor, t.MinInsyncReplicas = rf, m
		writeJSON(w, http.StatusOK, *t)
	}
}

// decommission follows docs/internals/http-api.md §2.17: dry run → 200 verdict, refusal → 409, start → 204,
// cancel (DELETE) → 204 or 409 when the member already left Raft, unknown member → 404.
func (f *Fake) decommission(w http.ResponseWriter, r *http.Request, id string) {
	idx := -1
	for i, m := range f.state.Members {
		if m.ID == id {
			idx = i
		}
	}
	if idx < 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "member not found"})
		return
	}
	reasons := f.state.Refuse[id]
	switch {
	case r.Method == http.MethodDelete && f.state.Members[idx].RaftRole == "none":
		writeJSON(w, http.StatusConflict, map[string]any{"error": "member already removed from the raft configuration", "node": id})
	case r.Method == http.MethodDelete:
		f.state.Members[idx].Draining = false
		if f.state.Members[idx].Status == "draining" {
			f.state.Members[idx].Status = "alive"
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method != http.MethodPost:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
	case r.URL.Query().Get("dry_run") == "true":
		writeJSON(w, http.StatusOK, map[string]any{"node": id, "dry_run": true, "allowed": len(reasons) == 0,
			"reasons": nonNilStrings(reasons), "moves": nonNilPlanned(f.state.PlannedMoves[id])})
	case len(reasons) > 0 || len(f.state.RefuseOnStart[id]) > 0:
		reasons = append(append([]string(nil), reasons...), f.state.RefuseOnStart[id]...)
		writeJSON(w, http.StatusConflict, map[string]any{"error": "decommission refused", "node": id, "reasons": reasons})
	default:
		f.state.Members[idx].Draining = true
		f.state.Members[idx].Status = "draining"
		w.WriteHeader(http.StatusNoContent)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMoves(m []client.Move) []client.Move {
	if m == nil {
		return []client.Move{}
	}
	return m
}

func nonNilPlanned(m []client.PlannedMove) []client.PlannedMove {
	if m == nil {
		return []client.PlannedMove{}
	}
	return m
}
