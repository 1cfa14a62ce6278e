package cli

import (
	"context"
	"strings"
	"testing"
)

func TestClusterElectLeadersPrintsTheElectionsAndSendsTheFilters(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/cluster/elect-leaders", 200,
		`{"elections":[{"topic":"orders","partition":2,"from":"n2","to":"n1","reason":"preferred","epoch":5}]}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "elect-leaders", "--preferred",
		"--topic", "orders", "--partition", "2")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, line := range [][]string{{"TOPIC", "PARTITION", "FROM", "TO", "REASON", "EPOCH"}, {"orders", "2", "n2", "n1", "preferred", "5"}} {
		if !containsLine(r.stdout, line...) {
			t.Fatalf("table lacks %v:\n%s", line, r.stdout)
		}
	}
	if got := f.callsTo("POST", "/v1/cluster/elect-leaders"); len(got) != 1 ||
		strings.TrimSpace(got[0].Body) != `{"preferred":true,"topic":"orders","partition":2}` {
		t.Fatalf("calls %+v", got)
	}

	f.fixed("POST /v1/cluster/elect-leaders", 200, `{"elections":[]}`)
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "elect-leaders")
	if r.code != 0 || !strings.Contains(r.stderr, "no election was needed") {
		t.Fatalf("no elections: %+v", r)
	}
	calls := len(f.allCalls())
	for _, args := range [][]string{{"--partition", "1"}, {"--topic", "orders", "--partition", "-1"}} {
		if r := runCLI(context.Background(), testApp(envFor(t, f)), "", append([]string{"cluster", "elect-leaders"}, args...)...); r.code != 1 || len(f.allCalls()) != calls {
			t.Fatalf("%v must fail before any call: %+v", args, r)
		}
	}
	f.fixed("POST /v1/cluster/elect-leaders", 404, `{"error":"topic \"x\": not found"}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "elect-leaders", "--topic", "x"); r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Fatalf("404: %+v", r)
	}
}
