package server

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// doBody is clusterFixture.do with a request body.
func (f *clusterFixture) doBody(t *testing.T, method, target, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.routes.ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, target, rec.Body.String(), err)
		}
	}
	return rec.Code, out
}

// A forced decommission on the leader: 200 with exactly the lost partitions; 409 dead_owner
// with the missing ones; each audited as cluster.decommission.force.
func TestForcedDecommissionOnTheLeaderAnswersLostOrMissing(t *testing.T) {
	f := newClusterFixture(t)
	const path = "/v1/cluster/members/n3/decommission"
	status, body := f.doBody(t, "POST", path, `{"force":true,"lose":[{"topic":"orders","partition":1}]}`)
	if status != 409 || body["reasons"].([]any)[0] != "dead_owner" ||
		!reflect.DeepEqual(body["missing"], []any{map[string]any{"topic": "orders", "partition": 0.0}}) {
		t.Fatalf("partial list: %d %v", status, body)
	}
	if f.decom.isDraining("n3") {
		t.Fatal("a refused force set the drain flag")
	}
	status, body = f.doBody(t, "POST", path, `{"force":true,"lose":[{"topic":"orders","partition":0}]}`)
	want := []any{map[string]any{"topic": "orders", "partition": 0.0, "owner": "n3", "new_owner": "n1",
		"leader_epoch": 1.0, "restarts_at": 0.0}}
	if status != 200 || body["forced"] != true || body["node"] != "n3" || !reflect.DeepEqual(body["lost"], want) {
		t.Fatalf("forced: %d %v", status, body)
	}
	if !f.decom.isDraining("n3") {
		t.Fatal("the forced decommission did not set the drain flag")
	}
	var events []string
	for _, a := range f.audits(t) {
		events = append(events, fmt.Sprint(a["event"], ":", a["outcome"]))
	}
	if got := strings.Join(events, " "); got != "cluster.decommission.force:denied cluster.decommission.force:ok" {
		t.Fatalf("audit events %s", got)
	}
}
