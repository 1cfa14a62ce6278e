package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/client"
)

// The cluster tests run the harness against fake narad processes: this test binary re-executed
// through a wrapper script with HARNESS_FAKE_NARAD=1, which init turns into the fake before
// any test runs. A fake serves /readyz and /v1/cluster/members (members from
// FAKE_IDS, the first three voters, FAKE_LEADER leading) and counts its boots in its data dir,
// so process control can be tested without a broker build.

func init() {
	if os.Getenv("HARNESS_FAKE_NARAD") == "1" {
		fakeNarad(os.Args[1:])
	}
}

// fakeNarad is the fake's body; it never returns.
func fakeNarad(args []string) {
	flag := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	if slices.Contains(args, "--help") {
		fmt.Println("--heartbeat-interval duration\n--heartbeat-timeout duration")
		os.Exit(0)
	}
	id := flag("--node-id")
	if slices.Contains(strings.Split(os.Getenv("FAKE_EXIT"), ","), id) {
		os.Exit(3)
	}
	dir := flag("--data-dir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		os.Exit(4)
	}
	boots, _ := os.ReadFile(filepath.Join(dir, "boots"))
	n, _ := strconv.Atoi(string(boots))
	_ = os.WriteFile(filepath.Join(dir, "boots"), []byte(strconv.Itoa(n+1)), 0o644)
	leader := os.Getenv("FAKE_LEADER")
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status":"ready"}`) })
	mux.HandleFunc("/v1/cluster/members", func(w http.ResponseWriter, _ *http.Request) {
		l := client.MemberList{Leader: leader, LeaderReachable: true}
		for i, m := range strings.Split(os.Getenv("FAKE_IDS"), ",") {
			role := "voter"
			if i >= 3 {
				role = "nonvoter"
			}
			l.Members = append(l.Members, client.Member{ID: m, Status: client.StatusAlive, RaftRole: role, Leader: m == leader})
		}
		_ = json.NewEncoder(w).Encode(l)
	})
	fmt.Println(http.ListenAndServe(flag("--http-addr"), mux))
	os.Exit(5)
}

// fakeCluster prepares an n-node cluster of fakes (not started) removed when the test ends.
func fakeCluster(t *testing.T, n int, env ...string) *Cluster {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "narad")
	body := fmt.Sprintf("#!/bin/sh\nHARNESS_FAKE_NARAD=1 exec %q \"$@\"\n", exe)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NARAD_BIN", script)
	c, err := NewCluster(ClusterOptions{N: n, Secret: "s3", Env: env, ReadyTimeout: 20 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Cleanup)
	return c
}

func startFake(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v\n%s", err, c.Tails(10))
	}
}

func boots(t *testing.T, c *Cluster, i int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Node(i).DataDir, "data", "boots"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(string(b))
	return n
}

func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func TestStartBootstrapsTheFirstNodeAndJoinsEachLaterOneThroughItsPredecessors(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3", "FAKE_LEADER=n1")
	startFake(t, c)
	a0 := c.Node(0).Opts.Args
	if !slices.Contains(a0, "--bootstrap") || slices.Contains(a0, "--join") {
		t.Fatalf("n1 args %v: want --bootstrap and no --join", a0)
	}
	for i, want := range [][]string{nil, {c.Node(0).ClusterAddr}, {c.Node(0).ClusterAddr, c.Node(1).ClusterAddr}} {
		if i == 0 {
			continue
		}
		got, ok := flagValue(c.Node(i).Opts.Args, "--join")
		if !ok || got != strings.Join(want, ",") || slices.Contains(c.Node(i).Opts.Args, "--bootstrap") {
			t.Fatalf("%s args %v: want --join %s and no --bootstrap", c.ID(i), c.Node(i).Opts.Args, strings.Join(want, ","))
		}
	}
	hosts := map[string]bool{}
	for i := range c.Size() {
		args := c.Node(i).Opts.Args
		if v, _ := flagValue(args, "--heartbeat-timeout"); v != "5s" {
			t.Errorf("%s: --heartbeat-timeout = %q, want 5s (the binary lists the flag)", c.ID(i), v)
		}
		if !slices.Contains(args, "--security-enabled=false") {
			t.Errorf("%s: security not turned off: %v", c.ID(i), args)
		}
		if !slices.Contains(c.Node(i).Opts.Env, "NARAD_CLUSTER_SECRET=s3") {
			t.Errorf("%s: cluster secret not passed", c.ID(i))
		}
		hosts[c.Node(i).Host] = true
	}
	if len(hosts) != 3 {
		t.Fatalf("nodes share loopback hosts: %v", hosts)
	}
}

func TestStartFailsFastWhenANodeExitsBeforeReady(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3", "FAKE_LEADER=n1", "FAKE_EXIT=n2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	err := c.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "n2 exited before ready") {
		t.Fatalf("Start = %v, want n2 exited before ready", err)
	}
	if time.Since(began) > 15*time.Second {
		t.Fatalf("Start took %s to notice the exit", time.Since(began))
	}
}

func TestLeaderNamesOnlyALiveNodeThatClaimsLeadership(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3", "FAKE_LEADER=n2")
	startFake(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if i, err := c.LeaderIndex(ctx); err != nil || i != 1 {
		t.Fatalf("Leader = %d, %v; want 1", i, err)
	}
	c.Kill(1)
	short, cancel2 := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel2()
	if i, err := c.LeaderIndex(short); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader after killing the leader = %d, %v; want ErrNoLeader (the others still name n2)", i, err)
	}
}

func TestPausedNodeIsNotLiveAndDoesNotStallMembers(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3", "FAKE_LEADER=n1")
	startFake(t, c)
	c.Pause(0)
	if got := c.Live(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Live with n1 paused = %v, want [1 2]", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	l, from, err := c.Members(ctx)
	if err != nil || from == "n1" || len(l.Members) != 3 {
		t.Fatalf("Members with n1 paused = %v from %q, %v", l, from, err)
	}
	if time.Since(began) > time.Second {
		t.Fatalf("Members took %s: it asked the frozen node", time.Since(began))
	}
	c.Resume(0)
	if got := c.Live(); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("Live after resume = %v", got)
	}
	if err := c.WaitReady(ctx, 0); err != nil {
		t.Fatalf("resumed node not serving: %v", err)
	}
}

func TestRestartKeepsDataAndAWipedFirstNodeRejoinsInsteadOfBootstrapping(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3", "FAKE_LEADER=n1")
	startFake(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := c.Node(0).HTTPAddr
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if boots(t, c, 0) != 2 || c.Node(0).HTTPAddr != addr {
		t.Fatalf("restart: boots=%d addr=%s; want 2 boots on %s", boots(t, c, 0), c.Node(0).HTTPAddr, addr)
	}
	if !slices.Contains(c.Node(0).Opts.Args, "--bootstrap") {
		t.Fatalf("restart of n1 with data changed its flags: %v", c.Node(0).Opts.Args)
	}
	if err := c.Wipe(0); err != nil {
		t.Fatal(err)
	}
	if c.Node(0).Running() || boots(t, c, 0) != 0 {
		t.Fatalf("wipe left running=%v boots=%d", c.Node(0).Running(), boots(t, c, 0))
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	join, ok := flagValue(c.Node(0).Opts.Args, "--join")
	if !ok || slices.Contains(c.Node(0).Opts.Args, "--bootstrap") || join != c.Node(1).ClusterAddr+","+c.Node(2).ClusterAddr {
		t.Fatalf("wiped n1 args %v: want --join through n2,n3 and no --bootstrap", c.Node(0).Opts.Args)
	}
	if boots(t, c, 0) != 1 {
		t.Fatalf("wiped node booted on old data: boots=%d", boots(t, c, 0))
	}
}

func TestAddNodeJoinsThroughEveryMemberAndVotersStayAtThree(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3,n4", "FAKE_LEADER=n1")
	startFake(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	i, err := c.AddNode(ctx)
	if err != nil || i != 3 || c.ID(i) != "n4" {
		t.Fatalf("AddNode = %d, %v", i, err)
	}
	join, _ := flagValue(c.Node(3).Opts.Args, "--join")
	if len(strings.Split(join, ",")) != 3 {
		t.Fatalf("n4 joined through %q, want all three members", join)
	}
	if err := c.WaitVoters(ctx, 3); err != nil {
		t.Fatal(err)
	}
}

func TestWaitMemberTimesOutNamingTheLastListSeen(t *testing.T) {
	c := fakeCluster(t, 1, "FAKE_IDS=n1", "FAKE_LEADER=n1")
	startFake(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := c.WaitMember(ctx, "n9", client.StatusAlive)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "leader=n1 reachable=true n1:alive/voter/0p*") {
		t.Fatalf("WaitMember(n9) = %v; want a deadline error showing the list", err)
	}
}

func TestUnexpectedNamesNodesThatExitedWithoutTheHarnessKillingThem(t *testing.T) {
	c := fakeCluster(t, 3, "FAKE_IDS=n1,n2,n3", "FAKE_LEADER=n1")
	startFake(t, c)
	if got := c.Unexpected(); len(got) != 0 {
		t.Fatalf("Unexpected on a healthy cluster = %v", got)
	}
	c.Kill(2)
	_ = c.Node(1).Stop() // a SIGTERM from outside the cluster's control
	got := c.Unexpected()
	if len(got) != 1 || !strings.HasPrefix(got[0], "n2 exited on its own") || !strings.Contains(got[0], "terminated") {
		t.Fatalf("Unexpected = %v, want only n2 with its SIGTERM exit", got)
	}
	if !strings.Contains(c.Tails(1), "EXITED ON ITS OWN") {
		t.Fatalf("Tails does not flag the unexpected exit:\n%s", c.Tails(1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := c.Unexpected(); len(got) != 0 {
		t.Fatalf("a restarted node is still reported: %v", got)
	}
}
