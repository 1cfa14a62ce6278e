package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
)

// fakeElector is the leader's controller behind op 36.
type fakeElector struct {
	mu    sync.Mutex
	calls []controller.ElectRequest
	err   error
}

func (f *fakeElector) ElectLeaders(_ context.Context, req controller.ElectRequest) ([]controller.Election, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	if f.err != nil {
		return nil, f.err
	}
	return []controller.Election{{Topic: "orders", Partition: 1, From: "n2", To: "n1", Reason: meta.ElectPreferred, Epoch: 4}}, nil
}

// post sends body to POST /v1/cluster/elect-leaders.
func (f *clusterFixture) post(t *testing.T, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.routes.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/cluster/elect-leaders", strings.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, out
}

func electFixture(t *testing.T) (*clusterFixture, *fakeElector) {
	f := newClusterFixture(t)
	el := &fakeElector{}
	svc := &clusterService{store: f.store, peers: f.peers, mv: noderpc.MoveDeps{Decom: f.decom, Elector: el}}
	f.routes = clusterHandler(svc, slog.New(slog.NewJSONHandler(f.logs, nil)), func() *meta.User { return f.caller })
	return f, el
}

// On the leader the controller runs the request and the answer lists its elections; off the
// leader the request goes to the leader (op 36) with the same fields.
func TestElectLeadersRunsOnTheLeaderAndIsForwardedElsewhere(t *testing.T) {
	f, el := electFixture(t)
	status, body := f.post(t, `{"preferred":true,"topic":"orders","partition":1}`)
	want := []any{map[string]any{"topic": "orders", "partition": 1.0, "from": "n2", "to": "n1", "reason": "preferred", "epoch": 4.0}}
	if status != 200 || !reflect.DeepEqual(body["elections"], want) {
		t.Fatalf("on the leader: %d %v, want 200 with %v", status, body, want)
	}
	if got := el.calls; len(got) != 1 || got[0] != (controller.ElectRequest{Preferred: true, Topic: "orders", Partition: 1}) {
		t.Fatalf("controller calls %+v", got)
	}

	f.store.leading = false
	f.peers.elect = func(c noderpc.ElectCall) ([]controller.Election, error) { return nil, nil }
	status, body = f.post(t, ``) // an empty body is {}: the failover planner over everything
	if status != 200 || !reflect.DeepEqual(body["elections"], []any{}) {
		t.Fatalf("forwarded: %d %v, want 200 with no elections", status, body)
	}
	if got := f.peers.electCalls; len(got) != 1 || got[0] != (noderpc.ElectCall{Partition: -1}) {
		t.Fatalf("forwarded calls %+v, want one for every partition without preferred", got)
	}
	f.peers.elect = func(noderpc.ElectCall) ([]controller.Election, error) {
		return nil, fmt.Errorf("%w: no topic", meta.ErrNotFound)
	}
	if status, body := f.post(t, `{"topic":"nope"}`); status != 404 || body["error"] == nil {
		t.Fatalf("leader's not found: %d %v, want 404", status, body)
	}
	f.peers.elect = nil // unreachable leader
	if status, body := f.post(t, `{}`); status != 503 || body["error"] == nil {
		t.Fatalf("unreachable leader: %d %v, want 503", status, body)
	}
}

// Bad bodies are 400 with a JSON error naming the field, non-admins 403; neither reaches
// the controller.
func TestElectLeadersRefusesBadBodiesAndNonAdmins(t *testing.T) {
	f, el := electFixture(t)
	for _, bad := range []string{
		`{"preferred":"yes"}`, `{"bogus":1}`, `[]`, `{} {}`, `{"partition":1}`, `{"topic":"orders","partition":-1}`,
		`{"topic":"orders","partition":4294967296}`, `{"topic":"no/slash"}`, `{"topic":"` + strings.Repeat("x", 300) + `"}`,
	} {
		if status, body := f.post(t, bad); status != 400 || body["error"] == nil {
			t.Fatalf("%s: %d %v, want 400 with an error", bad, status, body)
		}
	}
	f.caller = &meta.User{Username: "bob", Grants: []meta.Grant{{Action: meta.ActionProduce, Patterns: []string{"*"}}}}
	if status, _ := f.post(t, `{}`); status != 403 {
		t.Fatalf("non-admin: %d, want 403", status)
	}
	if len(el.calls) != 0 {
		t.Fatalf("refused requests reached the controller: %+v", el.calls)
	}
}
