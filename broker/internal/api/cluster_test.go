package api

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"narad.dev/broker/internal/controller"
)

// fakeCluster is a ClusterBackend answering from fixed values and recording its calls.
type fakeCluster struct {
	abortErr error
	decomErr error
	decomRes DecommissionResult
	aborts   []string
	decoms   []DecommissionRequest
}

func (f *fakeCluster) Members(context.Context) MemberList {
	return MemberList{Members: []Member{{ID: "n1", Status: MemberAlive}}, LeaderReachable: true, Leader: "n1"}
}

func (f *fakeCluster) Moves(_ context.Context, detail bool) []Move {
	return []Move{{Topic: "t", From: "n1", To: "n2", Blocked: []string{}, DetailError: map[bool]string{true: "asked"}[detail]}}
}

func (f *fakeCluster) AbortMove(_ context.Context, topic string, p int, target string) (AbortedMove, error) {
	f.aborts = append(f.aborts, topic+"|"+target)
	if f.abortErr != nil {
		return AbortedMove{}, f.abortErr
	}
	return AbortedMove{Topic: topic, Partition: p, Owner: "n1", Target: "n2"}, nil
}

func (f *fakeCluster) Decommission(_ context.Context, req DecommissionRequest) (DecommissionResult, error) {
	f.decoms = append(f.decoms, req)
	return f.decomRes, f.decomErr
}

// The cluster handlers parse and authorize before the backend is called, and map its errors
// through statusOf with the message and fields the backend chose.
func TestClusterHandlersMapBackendAnswersToStatuses(t *testing.T) {
	fc := &fakeCluster{}
	env := newEnv(t, func(o *Options) { o.Cluster = fc })

	expectStatus(t, env.do("GET", "/v1/cluster/members", "", nil), 401)
	if rec := env.do("GET", "/v1/cluster/members", "bob", nil); rec.Code != 200 ||
		rec.Body.String() != `{"members":[{"id":"n1","addr":"","cluster_addr":"","status":"alive","draining":false,"raft_role":"","leader":false,"owned_partitions":0,"outbound_moves":0,"last_heartbeat":0}],"leader_reachable":true,"leader":"n1"}`+"\n" {
		t.Fatalf("members: %d %s", rec.Code, rec.Body.String())
	}
	if rec := env.do("GET", "/v1/cluster/moves?detail=true", "bob", nil); rec.Code != 200 ||
		rec.Body.String() != `{"moves":[{"topic":"t","partition":0,"from":"n1","to":"n2","from_status":"","to_status":"","blocked":[],"detail_error":"asked"}]}`+"\n" {
		t.Fatalf("moves: %d %s", rec.Code, rec.Body.String())
	}
	expectStatus(t, env.do("GET", "/v1/cluster/moves?detail=1", "bob", nil), 400)

	// Abort: admin, then the partition and target parameters, then the backend.
	expectStatus(t, env.do("POST", "/v1/cluster/moves/t/0/abort", "bob", nil), 403)
	expectStatus(t, env.do("POST", "/v1/cluster/moves/t/x/abort", "ops", nil), 400)
	expectStatus(t, env.do("POST", "/v1/cluster/moves/t/0/abort?target=a&target=b", "ops", nil), 400)
	if len(fc.aborts) != 0 {
		t.Fatalf("refused requests reached the backend: %v", fc.aborts)
	}
	rec := env.do("POST", "/v1/cluster/moves/t/3/abort?target=n2", "ops", nil)
	if rec.Code != 202 || rec.Body.String() != `{"aborted_target":"n2","owner":"n1","partition":3,"topic":"t"}`+"\n" {
		t.Fatalf("abort: %d %s", rec.Code, rec.Body.String())
	}
	fc.abortErr = &ClusterError{Kind: ErrConflict, Msg: "no move in flight", Fields: map[string]any{"owner": "n1", "target": ""}}
	body := expectJSONError(t, env.do("POST", "/v1/cluster/moves/t/3/abort", "ops", nil))
	if body["error"] != "no move in flight" || body["owner"] != "n1" || body["target"] != "" {
		t.Fatalf("409 body %v", body)
	}
	fc.abortErr = &AbortUnknownError{Step: "propose", Err: errors.New("no quorum")}
	rec = env.do("POST", "/v1/cluster/moves/t/3/abort", "ops", nil)
	expectStatus(t, rec, http.StatusServiceUnavailable)
	if body := expectJSONError(t, rec); body["error"] != "abort outcome unknown (propose): no quorum" {
		t.Fatalf("503 body %v", body)
	}

	// Decommission: a dry run's verdict, a change made, a refusal with its fields.
	fc.decomRes = DecommissionResult{Evaluated: true, Verdict: controller.Verdict{Node: "n2", Allowed: true}}
	if rec := env.do("POST", "/v1/cluster/members/n2/decommission?dry_run=true", "ops", nil); rec.Code != 200 ||
		rec.Body.String() != `{"allowed":true,"dry_run":true,"moves":[],"node":"n2","reasons":[]}`+"\n" {
		t.Fatalf("dry run: %d %s", rec.Code, rec.Body.String())
	}
	fc.decomRes = DecommissionResult{}
	expectStatus(t, env.do("DELETE", "/v1/cluster/members/n2/decommission", "ops", nil), 204)
	expectStatus(t, env.do("POST", "/v1/cluster/members/n2/decommission?dry_run=maybe", "ops", nil), 400)
	fc.decomErr = &ClusterError{Kind: ErrConflict, Msg: "refused", Fields: map[string]any{"node": "n2", "reasons": []string{"min_voters"}}}
	if body := expectJSONError(t, env.do("POST", "/v1/cluster/members/n2/decommission", "ops", nil)); body["node"] != "n2" {
		t.Fatalf("409 body %v", body)
	}
	want := []DecommissionRequest{{ID: "n2", DryRun: true}, {ID: "n2", Cancel: true}, {ID: "n2"}}
	if len(fc.decoms) != len(want) || fc.decoms[0] != want[0] || fc.decoms[1] != want[1] || fc.decoms[2] != want[2] {
		t.Fatalf("decommission calls %+v, want %+v", fc.decoms, want)
	}
}

// Without Options.Cluster there are no /v1/cluster endpoints.
func TestNoClusterBackendNoClusterRoutes(t *testing.T) {
	env := newEnv(t)
	expectStatus(t, env.do("GET", "/v1/cluster/members", "ops", nil), 404)
}
