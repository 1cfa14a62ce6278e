package cli

import (
	"context"
	"strings"
	"testing"
)

const movesBody = `{"moves":[` +
	`{"topic":"orders","partition":3,"from":"n1","to":"n2","from_status":"alive","to_status":"alive","blocked":[],` +
	`"detail":{"reported_by":"n2","phase":"copying","passes":4,"copied_bytes":1572864}},` +
	`{"topic":"orders","partition":5,"from":"n3","to":"n4","from_status":"dead","to_status":"draining","blocked":["source_dead"],` +
	`"detail":{"phase":"blocked","blocked_reason":"source_dead_copy_behind","passes":9,"copied_bytes":0}},` +
	`{"topic":"pay","partition":0,"from":"n1","to":"n9","from_status":"alive","to_status":"not_a_member","blocked":["target_not_member"],` +
	`"detail_error":"the destination is not a member"}]}`

func TestClusterMovesPrintsATableWithBlockedReasons(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/moves", 200, movesBody)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, line := range [][]string{
		{"TOPIC", "PARTITION", "FROM", "TO", "FROM_STATUS", "TO_STATUS", "BLOCKED"},
		{"orders", "3", "n1", "n2", "alive", "alive", "-"},
		{"orders", "5", "n3", "n4", "dead", "draining", "source_dead"},
		{"pay", "0", "n1", "n9", "alive", "not_a_member", "target_not_member"},
	} {
		if !containsLine(r.stdout, line...) {
			t.Fatalf("table lacks %v:\n%s", line, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "PHASE") || f.callsTo("GET", "/v1/cluster/moves")[0].Query.Has("detail") {
		t.Fatalf("detail shown or asked without --detail:\n%s", r.stdout)
	}
}

func TestClusterMovesDetailAddsPhasePassesCopiedAndNotes(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/moves", 200, movesBody)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "--detail")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if q := f.callsTo("GET", "/v1/cluster/moves")[0].Query; q.Get("detail") != "true" {
		t.Fatalf("query %v", q)
	}
	for _, line := range [][]string{
		{"TOPIC", "PARTITION", "FROM", "TO", "FROM_STATUS", "TO_STATUS", "BLOCKED", "PHASE", "PASSES", "COPIED"},
		{"orders", "3", "n1", "n2", "alive", "alive", "-", "copying", "4", "1.5", "MiB"},
		{"orders", "5", "blocked", "(source_dead_copy_behind)", "9"},
		{"pay", "0", "target_not_member", "?"},
		{"note:", "pay/0:", "the", "destination", "is", "not", "a", "member"},
	} {
		if !containsLine(r.stdout, line...) {
			t.Fatalf("table lacks %v:\n%s", line, r.stdout)
		}
	}
}

func TestClusterMovesJSONAndEmptyList(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/moves", 200, movesBody)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"from_status": "dead"`) || !strings.Contains(r.stdout, `"moves": [`) {
		t.Fatalf("--json: %+v", r)
	}
	f.fixed("GET /v1/cluster/moves", 200, `{"moves":[]}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves"); r.code != 0 || strings.TrimSpace(r.stdout) != "no moves in flight" {
		t.Fatalf("empty: %+v", r)
	}
}

func TestClusterMoveAbortExitCodes(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/cluster/moves/orders/1/abort", 409, `{"error":"the partition's owner changed to n2","owner":"n2","target":""}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "abort", "orders", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "owner=n2 target=(none)") {
		t.Fatalf("409 after a flip: %+v", r)
	}
	f.fixed("POST /v1/cluster/moves/orders/1/abort", 503, `{"error":"abort outcome unknown"}`)
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "abort", "orders", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "http 503") || !strings.Contains(r.stderr, "outcome unknown") {
		t.Fatalf("503: %+v", r)
	}
	calls := len(f.allCalls())
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "abort", "orders", "x"); r.code != 1 || len(f.allCalls()) != calls {
		t.Fatalf("bad partition must fail before any call: %+v", r)
	}
}

func TestClusterDecommissionDryRunAllowedExits0AndFlagsExclude(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/cluster/members/n4/decommission", 200, `{"node":"n4","dry_run":true,"allowed":true,"reasons":[]}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, `"allowed": true`) {
		t.Fatalf("allowed dry run: %+v", r)
	}
	if q := f.callsTo("POST", "/v1/cluster/members/n4/decommission")[0].Query; q.Get("dry_run") != "true" {
		t.Fatalf("query %v", q)
	}
	f.fixed("POST /v1/cluster/members/n4/decommission", 204, "")
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4"); r.code != 0 || !strings.Contains(r.stderr, "draining") {
		t.Fatalf("start: %+v", r)
	}
	calls := len(f.allCalls())
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4", "--dry-run", "--cancel"); r.code != 1 || len(f.allCalls()) != calls {
		t.Fatalf("--dry-run with --cancel: %+v", r)
	}
	f.fixed("DELETE /v1/cluster/members/n4/decommission", 409, `{"error":"member n4 was already removed from raft"}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4", "--cancel"); r.code != 1 || !strings.Contains(r.stderr, "http 409") {
		t.Fatalf("cancel after removal: %+v", r)
	}
}

func TestClusterMembersShowsDecommissionBlockedOrUnknown(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/members", 200, `{"members":[`+
		`{"id":"n1","addr":"a:1","status":"alive","raft_role":"voter","leader":true,"owned_partitions":4,"last_heartbeat":1795970000,"decommission_blocked":[]},`+
		`{"id":"n4","addr":"a:4","status":"draining","raft_role":"voter","owned_partitions":0,"decommission_blocked":["ingress_backlog","leader_transfer"]}],`+
		`"leader_reachable":true,"leader":"n1"}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "members")
	if r.code != 0 || !containsLine(r.stdout, "n4", "draining", "ingress_backlog,leader_transfer") || !containsLine(r.stdout, "n1", "alive", "-") {
		t.Fatalf("members:\n%s%s", r.stdout, r.stderr)
	}
	f.fixed("GET /v1/cluster/members", 200, `{"members":[{"id":"n1","addr":"a:1","status":"alive","raft_role":"voter"}],"leader_reachable":false}`)
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "members")
	if r.code != 0 || !containsLine(r.stdout, "n1", "alive", "?") {
		t.Fatalf("unknown reasons must show ?:\n%s", r.stdout)
	}
}
