package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func akey(topic string, p int) string { return fmt.Sprintf("%s/%d", topic, p) }

// fakeStore is a clusterStore with two views of the assignments: replica (what this node's
// local reads see) and leader (what proposals act on and leader reads return), so a lagging
// replica and a flip that committed first can both be staged.
type fakeStore struct {
	mu         sync.Mutex
	self       string
	leading    bool
	leaderID   string
	leaderAddr string
	members    []meta.Member
	roles      map[string]string
	topics     map[string]meta.Topic
	replica    map[string]meta.Assignment
	leader     map[string]meta.Assignment
	abortErr   error // AbortMove fails with no verdict
	confirmErr error // ConfirmAssignment fails
	aborts     int
}

func newFakeStore() *fakeStore {
	return &fakeStore{self: "n1", leading: true, leaderID: "n1", leaderAddr: "127.0.0.1:1", roles: map[string]string{},
		topics: map[string]meta.Topic{}, replica: map[string]meta.Assignment{}, leader: map[string]meta.Assignment{}}
}

// assign sets an assignment in both views.
func (f *fakeStore) assign(a meta.Assignment) {
	f.replica[akey(a.Topic, a.Partition)] = a
	f.leader[akey(a.Topic, a.Partition)] = a
}

func (f *fakeStore) NodeID() string { return f.self }
func (f *fakeStore) IsLeader() bool { return f.leading }
func (f *fakeStore) Leader() (string, string) {
	return f.leaderID, f.leaderAddr
}
func (f *fakeStore) Members() []meta.Member    { return f.members }
func (f *fakeStore) RaftRole(id string) string { return f.roles[id] }
func (f *fakeStore) Topic(name string) (meta.Topic, bool) {
	t, ok := f.topics[name]
	return t, ok
}
func (f *fakeStore) Assignment(topic string, p int) (meta.Assignment, bool) {
	a, ok := f.replica[akey(topic, p)]
	return a, ok
}
func (f *fakeStore) AllAssignments() []meta.Assignment {
	out := []meta.Assignment{}
	for _, a := range f.replica {
		out = append(out, a)
	}
	return out
}

func (f *fakeStore) AbortMove(_ context.Context, topic string, p int, expected string) (meta.CASResult, meta.Assignment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborts++
	if f.abortErr != nil {
		return 0, meta.Assignment{}, f.abortErr
	}
	a, ok := f.leader[akey(topic, p)]
	if !ok {
		return meta.CASNotFound, meta.Assignment{}, meta.ErrNotFound
	}
	if a.Target != expected {
		return meta.CASNoop, a, nil
	}
	a.Target = ""
	f.leader[akey(topic, p)] = a
	return meta.CASDone, a, nil
}

func (f *fakeStore) ConfirmAssignment(_ context.Context, topic string, p int) (meta.Assignment, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.confirmErr != nil {
		return meta.Assignment{}, false, f.confirmErr
	}
	a, ok := f.leader[akey(topic, p)]
	return a, ok, nil
}

// fakePeers answers the cluster endpoints' node RPC from fixed tables.
type fakePeers struct {
	mu         sync.Mutex
	reports    map[string]transfer.Report // by addr
	reportErr  map[string]error           // by addr
	decom      func(noderpc.DecomCall) (noderpc.DecomResult, error)
	statusErr  error
	decomCalls []noderpc.DecomCall
	elect      func(noderpc.ElectCall) ([]controller.Election, error)
	electCalls []noderpc.ElectCall
}

func (f *fakePeers) NodeStatus(context.Context, string) (*nodepb.NodeStatusReply, error) {
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	return &nodepb.NodeStatusReply{Status: 200}, nil
}

func (f *fakePeers) DecommissionMember(_ context.Context, _ string, c noderpc.DecomCall) (noderpc.DecomResult, error) {
	f.mu.Lock()
	f.decomCalls = append(f.decomCalls, c)
	f.mu.Unlock()
	if f.decom == nil {
		return noderpc.DecomResult{}, fmt.Errorf("%w: unreachable", meta.ErrNoLeader)
	}
	return f.decom(c)
}

func (f *fakePeers) ElectLeaders(_ context.Context, _ string, c noderpc.ElectCall) ([]controller.Election, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.electCalls = append(f.electCalls, c)
	if f.elect == nil {
		return nil, fmt.Errorf("%w: unreachable", meta.ErrNoLeader)
	}
	return f.elect(c)
}

func (f *fakePeers) MoveReport(ctx context.Context, addr, _ string, _ int) (transfer.Report, error) {
	if err, ok := f.reportErr[addr]; ok {
		if err == context.DeadlineExceeded {
			<-ctx.Done()
			return transfer.Report{}, fmt.Errorf("%w: %v", api.ErrUnavailable, ctx.Err())
		}
		return transfer.Report{}, err
	}
	return f.reports[addr], nil
}

// clusterFixture is a cluster endpoint set over fakes, with the audit log captured.
type clusterFixture struct {
	store  *fakeStore
	peers  *fakePeers
	decom  *fakeDecom
	logs   *logBuffer
	routes http.Handler
	caller *meta.User
}

func newClusterFixture(t *testing.T) *clusterFixture {
	t.Helper()
	f := &clusterFixture{store: newFakeStore(), peers: &fakePeers{}, decom: newFakeDecom(), logs: &logBuffer{},
		caller: &meta.User{Username: "root", Root: true}}
	f.store.members = []meta.Member{
		{ID: "n1", ClusterAddr: "c1", Status: meta.MemberAlive},
		{ID: "n2", ClusterAddr: "c2", Status: meta.MemberAlive},
		{ID: "n3", ClusterAddr: "c3", Status: meta.MemberDead, Draining: true},
		{ID: "n4", ClusterAddr: "c4", Status: meta.MemberAlive, Draining: true},
	}
	f.store.topics["orders"] = meta.Topic{Name: "orders", Partitions: 4}
	svc := &clusterService{store: f.store, peers: f.peers, mv: testDeps(nil, nil, f.decom)}
	f.routes = clusterHandler(svc, slog.New(slog.NewJSONHandler(f.logs, nil)), func() *meta.User { return f.caller })
	return f
}

// clusterHandler is the api handler serving svc's /v1/cluster endpoints, with audit records
// written to logger. A request runs as caller(): authenticated with security on, or, when
// caller() is the synthetic root admin without a username (rootCallerOff), on a handler with
// security off, which hands the endpoints that caller itself.
func clusterHandler(svc *clusterService, logger *slog.Logger, caller func() *meta.User) http.Handler {
	opts := api.Options{
		Backend:         noBackend{},
		Cluster:         svc,
		SecurityEnabled: true,
		Auth:            callerAuth(caller),
		Logger:          logger,
		Audit:           audit.New(logger, svc.store.NodeID()),
	}
	on := api.NewHandler(opts)
	opts.SecurityEnabled, opts.Auth = false, nil
	off := api.NewHandler(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := caller(); u != nil && u.Root && u.Username == "" {
			off.ServeHTTP(w, r)
			return
		}
		on.ServeHTTP(w, r)
	})
}

// noBackend is an api.Backend the cluster endpoints never call.
type noBackend struct{ api.Backend }

// callerAuth authenticates every request as the user it returns.
type callerAuth func() *meta.User

func (f callerAuth) Authenticate(*http.Request) (*meta.User, error) { return f(), nil }

// do runs one request and decodes a JSON body (nil for an empty one).
func (f *clusterFixture) do(t *testing.T, method, target string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.routes.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	if rec.Body.Len() == 0 {
		return rec.Code, nil
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: content type %q", method, target, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: body %q: %v", method, target, rec.Body.String(), err)
	}
	return rec.Code, body
}

// audits returns the audit log lines.
func (f *clusterFixture) audits(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(f.logs.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "audit" {
			out = append(out, line)
		}
	}
	return out
}

func TestAbortFollowsTheSpecAlgorithm(t *testing.T) {
	cases := []struct {
		name        string
		stage       func(s *fakeStore)
		query       string
		wantStatus  int
		wantOwner   string
		wantTarget  any // the 409 body's target, or the 202 body's aborted_target
		wantCAS     bool
		wantOutcome string // audit outcome; "" = no audit line
	}{
		{"in-flight move is aborted", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
		}, "", 202, "n1", "n2", true, "ok"},
		{"matching --target is aborted", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
		}, "?target=n2", 202, "n1", "n2", true, "ok"},
		{"no move in flight", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1"})
		}, "", 409, "n1", "", false, ""},
		{"--target names another node", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
		}, "?target=n3", 409, "n1", "n2", false, ""},
		{"flip committed first", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
			s.leader[akey("orders", 1)] = meta.Assignment{Topic: "orders", Partition: 1, Owner: "n2"}
		}, "", 409, "n2", "", true, ""},
		{"re-planned elsewhere after the read: the move to T is gone", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
			s.leader[akey("orders", 1)] = meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n4"}
		}, "", 202, "n1", "n2", true, "ok"},
		{"read-back fails: outcome unknown", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
			s.confirmErr = fmt.Errorf("%w: leader unreachable", meta.ErrUnconfirmed)
		}, "", 503, "", nil, true, "unknown"},
		{"no leader for the proposal", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
			s.abortErr = meta.ErrNoLeader
		}, "", 503, "", nil, true, "unknown"},
		{"topic deleted before the proposal", func(s *fakeStore) {
			s.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
			delete(s.leader, akey("orders", 1))
		}, "", 404, "", nil, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newClusterFixture(t)
			tc.stage(f.store)
			status, body := f.do(t, "POST", "/v1/cluster/moves/orders/1/abort"+tc.query)
			if status != tc.wantStatus {
				t.Fatalf("status %d (%v), want %d", status, body, tc.wantStatus)
			}
			if _, ok := body["error"]; status >= 400 && !ok {
				t.Fatalf("error body without an error field: %v", body)
			}
			switch status {
			case 202:
				if body["owner"] != tc.wantOwner || body["aborted_target"] != tc.wantTarget || body["topic"] != "orders" || body["partition"] != 1.0 {
					t.Fatalf("202 body %v", body)
				}
			case 409:
				if body["owner"] != tc.wantOwner || body["target"] != tc.wantTarget {
					t.Fatalf("409 body %v, want owner %q target %q", body, tc.wantOwner, tc.wantTarget)
				}
			}
			if got := f.store.aborts > 0; got != tc.wantCAS {
				t.Fatalf("CAS proposed=%v, want %v", got, tc.wantCAS)
			}
			audits := f.audits(t)
			if tc.wantOutcome == "" {
				if len(audits) != 0 {
					t.Fatalf("unexpected audit lines %v", audits)
				}
				return
			}
			if len(audits) != 1 || audits[0]["event"] != "cluster.move.abort" || audits[0]["outcome"] != tc.wantOutcome || audits[0]["actor"] != "root" ||
				audits[0]["target"] != "orders/1" {
				t.Fatalf("audit lines %v, want one cluster.move.abort outcome %s", audits, tc.wantOutcome)
			}
		})
	}
}

func TestAbortRefusesBadInputAndNonAdmins(t *testing.T) {
	f := newClusterFixture(t)
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"})
	cases := []struct {
		target string
		want   int
	}{
		{"/v1/cluster/moves/orders/x/abort", 400},
		{"/v1/cluster/moves/orders/-1/abort", 400},
		{"/v1/cluster/moves/orders/99999999999/abort", 400},
		{"/v1/cluster/moves/orders/1/abort?target=n2&target=n3", 400},
		{"/v1/cluster/moves/nope/0/abort", 404},
		{"/v1/cluster/moves/orders/4/abort", 404},
		{"/v1/cluster/moves/orders/2/abort", 404}, // in range but no assignment in the replica
	}
	for _, tc := range cases {
		if status, body := f.do(t, "POST", tc.target); status != tc.want || body["error"] == nil {
			t.Fatalf("%s: %d %v, want %d with an error body", tc.target, status, body, tc.want)
		}
	}
	f.caller = &meta.User{Username: "bob", Grants: []meta.Grant{{Action: meta.ActionProduce, Patterns: []string{"*"}}}}
	if status, _ := f.do(t, "POST", "/v1/cluster/moves/orders/1/abort"); status != 403 {
		t.Fatalf("non-admin abort: %d", status)
	}
	if f.store.aborts != 0 {
		t.Fatal("a refused request proposed a CAS")
	}
}

func TestMovesListsEveryTargetSortedWithStatusesAndBlockedReasons(t *testing.T) {
	f := newClusterFixture(t)
	f.store.topics["alpha"] = meta.Topic{Name: "alpha", Partitions: 12}
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n1"}) // no move
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 3, Owner: "n3", Target: "n2"})
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 2, Owner: "n4", Target: "gone"})
	f.store.assign(meta.Assignment{Topic: "alpha", Partition: 10, Owner: "n1", Target: "n3"})
	f.store.assign(meta.Assignment{Topic: "alpha", Partition: 9, Owner: "old", Target: "n4"})
	status, body := f.do(t, "GET", "/v1/cluster/moves")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	var got struct {
		Moves []api.Move `json:"moves"`
	}
	if err := json.Unmarshal(mustJSON(t, body), &got); err != nil {
		t.Fatal(err)
	}
	want := []api.Move{
		{Topic: "alpha", Partition: 9, From: "old", To: "n4", FromStatus: "not_a_member", ToStatus: "draining", Blocked: []string{"source_dead"}},
		{Topic: "alpha", Partition: 10, From: "n1", To: "n3", FromStatus: "alive", ToStatus: "dead", Blocked: []string{"target_dead"}},
		{Topic: "orders", Partition: 2, From: "n4", To: "gone", FromStatus: "draining", ToStatus: "not_a_member", Blocked: []string{"target_not_member"}},
		{Topic: "orders", Partition: 3, From: "n3", To: "n2", FromStatus: "dead", ToStatus: "alive", Blocked: []string{"source_dead"}},
	}
	if !bytes.Equal(mustJSON(t, got.Moves), mustJSON(t, want)) {
		t.Fatalf("moves\n got %s\nwant %s", mustJSON(t, got.Moves), mustJSON(t, want))
	}
	if strings.Contains(string(mustJSON(t, body)), "detail") {
		t.Fatalf("detail without detail=true: %v", body)
	}
}

func TestMovesIsAnEmptyListWhenNothingMoves(t *testing.T) {
	f := newClusterFixture(t)
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n1"})
	rec := httptest.NewRecorder()
	f.routes.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/cluster/moves?detail=false", nil))
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"moves":[]}` {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

func TestMovesDetailAsksEachDestinationAndReportsWhoCouldNotBeAsked(t *testing.T) {
	f := newClusterFixture(t)
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n2", Target: "n1"}) // this node: local report
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n2"}) // answers
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 2, Owner: "n1", Target: "n3"}) // hangs past the bound
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 3, Owner: "n1", Target: "n4"}) // no worker
	f.store.topics["t"] = meta.Topic{Name: "t", Partitions: 1}
	f.store.assign(meta.Assignment{Topic: "t", Partition: 0, Owner: "n1", Target: "ghost"}) // not a member
	f.peers.reports = map[string]transfer.Report{"c2": {ReportedBy: "n2", Phase: transfer.PhaseFreezing, Passes: 2, CopiedBytes: 77}}
	f.peers.reportErr = map[string]error{"c3": context.DeadlineExceeded, "c4": fmt.Errorf("%w: no worker", api.ErrNotFound)}
	svc := &clusterService{store: f.store, peers: f.peers,
		mv: testDeps(nil, fakeReporter{topic: "orders", p: 0, rep: transfer.Report{ReportedBy: "n1", Phase: transfer.PhaseCopying}}, nil)}
	routes := clusterHandler(svc, slog.New(slog.DiscardHandler), func() *meta.User { return f.caller })
	start := time.Now()
	rec := httptest.NewRecorder()
	routes.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/cluster/moves?detail=true", nil))
	if took := time.Since(start); took > moveDetailTimeout+time.Second {
		t.Fatalf("detail took %v, bound is %v", took, moveDetailTimeout)
	}
	var got struct {
		Moves []api.Move `json:"moves"`
	}
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.Moves) != 5 {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
	m := got.Moves
	switch {
	case m[0].Detail == nil || m[0].Detail.ReportedBy != "n1":
		t.Fatalf("local destination: %+v", m[0])
	case m[1].Detail == nil || m[1].Detail.Passes != 2 || m[1].Detail.CopiedBytes != 77 || m[1].DetailError != "":
		t.Fatalf("answering destination: %+v", m[1])
	case m[2].Detail != nil || m[2].DetailError == "":
		t.Fatalf("hanging destination: %+v", m[2])
	case m[3].Detail != nil || !strings.Contains(m[3].DetailError, "no worker"):
		t.Fatalf("destination without a worker: %+v", m[3])
	case m[4].Detail != nil || !strings.Contains(m[4].DetailError, "not a member"):
		t.Fatalf("non-member destination: %+v", m[4])
	}
}

func TestMovesRejectsABadDetailValue(t *testing.T) {
	f := newClusterFixture(t)
	for _, q := range []string{"?detail=yes", "?detail=1", "?detail=", "?detail=true&detail=true"} {
		if status, body := f.do(t, "GET", "/v1/cluster/moves"+q); status != 400 || body["error"] == nil {
			t.Fatalf("%s: %d %v", q, status, body)
		}
	}
}

// A replica move of a replicated partition (op 25's target_replicas) is listed with its
// replicas, ISR and target: from = the replica outside the target, to = the joining one; it
// is blocked by a dead destination only, and detail=true asks nobody for it.
func TestMovesListsReplicaMoves(t *testing.T) {
	f := newClusterFixture(t)
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n3", Replicas: []string{"n3", "n1", "n2"},
		ISR: []string{"n3", "n1", "n2"}}) // replicated, no move
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n3", Replicas: []string{"n3", "n1", "n2"},
		ISR: []string{"n3", "n1"}, TargetReplicas: []string{"n2", "n1"}})
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 2, Owner: "n1", Replicas: []string{"n1", "n2", "n3"},
		ISR: []string{"n1", "n2"}, TargetReplicas: []string{"n1", "n3"}})
	f.peers.reportErr = map[string]error{"c2": errors.New("asked"), "c3": errors.New("asked")}
	want := []api.Move{
		{Topic: "orders", Partition: 1, From: "n3", To: "n2", FromStatus: "dead", ToStatus: "alive", Blocked: []string{},
			Replicas: []string{"n3", "n1", "n2"}, ISR: []string{"n3", "n1"}, TargetReplicas: []string{"n2", "n1"}},
		{Topic: "orders", Partition: 2, From: "n2", To: "n3", FromStatus: "alive", ToStatus: "dead", Blocked: []string{"target_dead"},
			Replicas: []string{"n1", "n2", "n3"}, ISR: []string{"n1", "n2"}, TargetReplicas: []string{"n1", "n3"}},
	}
	for _, q := range []string{"", "?detail=true"} {
		rec := httptest.NewRecorder()
		f.routes.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/cluster/moves"+q, nil))
		var got struct {
			Moves []api.Move `json:"moves"`
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.Moves) != 2 {
			t.Fatalf("%s: %d %s", q, rec.Code, rec.Body.String())
		}
		if q != "" {
			for i := range got.Moves {
				if !strings.Contains(got.Moves[i].DetailError, "replica move") || got.Moves[i].Detail != nil {
					t.Fatalf("detail of a replica move: %+v", got.Moves[i])
				}
				got.Moves[i].DetailError = ""
			}
		}
		if !bytes.Equal(mustJSON(t, got.Moves), mustJSON(t, want)) {
			t.Fatalf("%s: moves\n got %s\nwant %s", q, mustJSON(t, got.Moves), mustJSON(t, want))
		}
	}
}
