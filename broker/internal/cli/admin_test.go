package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestClusterMoveAbortConflictPrintsOwnerAndTargetAndExits1(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/cluster/moves/o/2/abort", 409, `{"error":"no move in flight","owner":"narad-1","target":""}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "abort", "o", "2", "--target", "narad-3")
	if r.code != 1 || r.stderr != "narad: http 409: no move in flight (owner=narad-1 target=(none))\n" {
		t.Fatalf("got %+v", r)
	}
	if q := f.callsTo("POST", "/v1/cluster/moves/o/2/abort")[0].Query; q.Get("target") != "narad-3" {
		t.Fatalf("query %v", q)
	}
	f.fixed("POST /v1/cluster/moves/o/2/abort", 202, `{"topic":"o","partition":2,"owner":"narad-1","aborted_target":"narad-3"}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "moves", "abort", "o", "2"); r.code != 0 || !strings.Contains(r.stdout, `"aborted_target": "narad-3"`) {
		t.Fatalf("202: %+v", r)
	}
}

func TestClusterDecommissionDryRunNotAllowedExits1(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/cluster/members/n4/decommission", 200, `{"node":"n4","dry_run":true,"allowed":false,"reasons":["min_voters"]}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4", "--dry-run")
	if r.code != 1 || !strings.Contains(r.stdout, `"allowed": false`) || r.stderr != "narad: decommission of n4 is not allowed: min_voters\n" {
		t.Fatalf("got %+v", r)
	}
	f.fixed("POST /v1/cluster/members/n4/decommission", 409, `{"error":"refused","node":"n4","reasons":["no_receivers","dead_owner"]}`)
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4")
	if r.code != 1 || r.stderr != "narad: http 409: refused (node=n4 reasons=no_receivers,dead_owner)\n" {
		t.Fatalf("refusal: %+v", r)
	}
	f.fixed("DELETE /v1/cluster/members/n4/decommission", 204, "")
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "decommission", "n4", "--cancel"); r.code != 0 {
		t.Fatalf("cancel: %+v", r)
	}
}

func TestUserAddSendsGrantsAndRequiresPassword(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/users", 201, `{"username":"bob","grants":[{"action":"produce","patterns":["o*"]}]}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "user", "add", "bob"); r.code != 1 || len(f.allCalls()) != 0 ||
		!strings.Contains(r.stderr, "--user-password-file") {
		t.Fatalf("no password and no terminal: %+v", r)
	}
	r := runCLI(context.Background(), testApp(envFor(t, f)), "pw\n", "user", "add", "bob", "--user-password-file", "-", "--grant", "produce:o*", "--grant", "admin")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	want := `{"username":"bob","password":"pw","grants":[{"action":"produce","patterns":["o*"]},{"action":"admin"}]}`
	if got := strings.TrimSpace(f.callsTo("POST", "/v1/users")[0].Body); got != want {
		t.Fatalf("body %s", got)
	}
	f.fixed("PUT /v1/users/bob/grants", 200, `{"username":"bob"}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "user", "grant", "bob", "--clear"); r.code != 0 ||
		strings.TrimSpace(f.callsTo("PUT", "/v1/users/bob/grants")[0].Body) != `{"grants":[]}` {
		t.Fatalf("grant --clear: %+v", r)
	}
}

func TestVersionAndCompletionPrint(t *testing.T) {
	r := runCLI(context.Background(), testApp(nil), "", "version")
	if r.code != 0 || r.stdout != "1.2.3-test\n" {
		t.Fatalf("version: %+v", r)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := runCLI(context.Background(), testApp(nil), "", "completion", sh)
		if r.code != 0 || !strings.Contains(r.stdout, "narad") {
			t.Fatalf("completion %s: code %d %s", sh, r.code, r.stderr)
		}
	}
	if r := runCLI(context.Background(), testApp(nil), "", "completion", "powershell"); r.code != 1 {
		t.Fatal("unsupported shell accepted")
	}
}

func TestServeAndServerStartAliasComeFromTheServeBuilder(t *testing.T) {
	var ran []string
	a := testApp(nil)
	a.opts.Serve = func() *cobra.Command {
		var dev bool
		c := &cobra.Command{Use: "serve [flags]", Short: "Run the server", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ran = append(ran, cmd.CommandPath()+" dev="+map[bool]string{true: "on", false: "off"}[dev])
				return nil
			}}
		c.Flags().BoolVar(&dev, "dev", false, "dev mode")
		return c
	}
	for _, args := range [][]string{{"serve", "--dev"}, {"server", "start", "--dev"}, {"server", "start"}} {
		if r := runCLI(context.Background(), a, "", args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	want := []string{"narad serve dev=on", "narad server start dev=on", "narad server start dev=off"}
	if strings.Join(ran, "|") != strings.Join(want, "|") {
		t.Fatalf("ran %v", ran)
	}
	root := newRoot(a)
	start, _, err := root.Find([]string{"server", "start"})
	if err != nil || !strings.Contains(start.Short, "alias of `narad serve`") {
		t.Fatalf("start: %v %q", err, start.Short)
	}
}

func TestServerReportSumsHighWatermarksAndListsOwners(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics", 200, `{"topics":[{"name":"o","partitions":3,"role":"parent"}],"next_page_token":""}`)
	f.fixed("GET /v1/topics/o", 200, `{"name":"o","partitions":3,"role":"parent","partition_stats":[`+
		`{"index":0,"owner_node":"n2","available":true,"high_watermark":10,"size_bytes":1024},`+
		`{"index":1,"owner_node":"n1","available":true,"high_watermark":5,"size_bytes":1024},`+
		`{"index":2,"owner_node":"n2","available":true,"high_watermark":1,"size_bytes":1024}]}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "server", "report")
	if r.code != 0 || !containsLine(r.stdout, "o", "3", "16", "3.0", "KiB", "n1,n2", "parent") {
		t.Fatalf("report:\n%s%s", r.stdout, r.stderr)
	}
}

func TestClusterMembersPrintsATableMarkingTheLeaderAndJSONOnRequest(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/members", 200, `{"members":[`+
		`{"id":"n1","addr":"10.0.0.1:7942","status":"alive","raft_role":"voter","leader":true,"owned_partitions":4,"last_heartbeat":1795970000},`+
		`{"id":"n2","addr":"10.0.0.2:7942","status":"dead","raft_role":"nonvoter","owned_partitions":2,"last_heartbeat":1795960000}],`+
		`"leader_reachable":false,"leader":"n1"}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "members")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"RAFT ROLE", "voter (leader)", "nonvoter", "dead", "2026-11-29T", "could not be reached"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("members table lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "members", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"leader": "n1"`) {
		t.Fatalf("--json: exit %d: %s", r.code, r.stdout)
	}
}
