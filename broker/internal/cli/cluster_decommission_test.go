package cli

import (
	"context"
	"strings"
	"testing"
)

// --force sends the --lose partitions as the body and prints what was lost; a refusal naming
// missing partitions shows them; bad flags fail before any call.
func TestClusterDecommissionForceSendsLoseAndPrintsLost(t *testing.T) {
	f := newFakeAPI(t)
	const path = "/v1/cluster/members/n3/decommission"
	f.fixed("POST "+path, 200, `{"node":"n3","forced":true,"lost":[{"topic":"orders","partition":2,"owner":"n3","new_owner":"n1","leader_epoch":1,"restarts_at":0}]}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n3", "--force", "--lose", "orders/2,orders/5")
	if r.code != 0 || !strings.Contains(r.stdout, `"new_owner": "n1"`) || !strings.Contains(r.stderr, "1 partition(s) lost") {
		t.Fatalf("forced: %+v", r)
	}
	if body := strings.TrimSpace(f.callsTo("POST", path)[0].Body); body != `{"force":true,"lose":[{"topic":"orders","partition":2},{"topic":"orders","partition":5}]}` {
		t.Fatalf("body %s", body)
	}
	f.fixed("POST "+path, 409, `{"error":"refused","node":"n3","reasons":["dead_owner"],"missing":[{"topic":"orders","partition":7}]}`)
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n3", "--force")
	if r.code != 1 || !strings.Contains(r.stderr, "missing=orders/7") {
		t.Fatalf("refused: %+v", r)
	}
	calls := len(f.allCalls())
	for _, args := range [][]string{
		{"--force", "--dry-run"}, {"--force", "--cancel"}, {"--lose", "orders/1"},
		{"--force", "--lose", "orders"}, {"--force", "--lose", "orders/-1"}, {"--force", "--lose", "/1"},
	} {
		r := runCLI(context.Background(), testApp(envFor(t, f)), "", append([]string{"cluster", "decommission", "n3"}, args...)...)
		if r.code != 1 || len(f.allCalls()) != calls {
			t.Fatalf("%v must fail before any call: %+v", args, r)
		}
	}
}
