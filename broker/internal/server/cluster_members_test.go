package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
)

func TestDecommissionOnTheLeaderAnswersEveryDocumentedStatus(t *testing.T) {
	f := newClusterFixture(t)
	f.decom.reasons["n3"] = []string{"min_voters"}
	f.decom.removed["n2"] = true
	cases := []struct {
		name, method, target string
		want                 int
		check                func(t *testing.T, body map[string]any)
	}{
		{"dry run allowed", "POST", "/v1/cluster/members/n4/decommission?dry_run=true", 200, func(t *testing.T, b map[string]any) {
			if b["node"] != "n4" || b["dry_run"] != true || b["allowed"] != true || len(b["reasons"].([]any)) != 0 {
				t.Fatalf("body %v", b)
			}
			if ms, ok := b["moves"].([]any); !ok || len(ms) != 0 {
				t.Fatalf("body %v: want an empty moves list", b)
			}
		}},
		{"dry run refused", "POST", "/v1/cluster/members/n3/decommission?dry_run=true", 200, func(t *testing.T, b map[string]any) {
			if b["allowed"] != false || b["reasons"].([]any)[0] != "min_voters" {
				t.Fatalf("body %v", b)
			}
		}},
		{"refused up front", "POST", "/v1/cluster/members/n3/decommission", 409, func(t *testing.T, b map[string]any) {
			if b["node"] != "n3" || b["reasons"].([]any)[0] != "min_voters" || b["error"] == nil {
				t.Fatalf("body %v", b)
			}
		}},
		{"started", "POST", "/v1/cluster/members/n4/decommission?dry_run=false", 204, nil},
		{"unknown member", "POST", "/v1/cluster/members/n9/decommission", 404, nil},
		{"bad dry_run", "POST", "/v1/cluster/members/n4/decommission?dry_run=maybe", 400, nil},
		{"cancelled", "DELETE", "/v1/cluster/members/n4/decommission", 204, nil},
		{"cancel after removal", "DELETE", "/v1/cluster/members/n2/decommission", 409, nil},
		{"cancel unknown member", "DELETE", "/v1/cluster/members/n9/decommission", 404, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.do(t, tc.method, tc.target)
			if status != tc.want {
				t.Fatalf("status %d (%v), want %d", status, body, tc.want)
			}
			if status >= 400 && body["error"] == nil {
				t.Fatalf("error body %v", body)
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
	var events []string
	for _, a := range f.audits(t) {
		events = append(events, fmt.Sprint(a["event"], ":", a["outcome"]))
	}
	if strings.Join(events, " ") != "cluster.decommission:ok cluster.decommission.cancel:ok" {
		t.Fatalf("audit events %v", events)
	}
	f.decom.err = meta.ErrNoLeader
	if status, _ := f.do(t, "POST", "/v1/cluster/members/n4/decommission"); status != 503 {
		t.Fatalf("no quorum: %d", status)
	}
	f.caller = &meta.User{Username: "bob"}
	if status, _ := f.do(t, "DELETE", "/v1/cluster/members/n4/decommission"); status != 403 {
		t.Fatalf("non-admin: %d", status)
	}
}

func TestDecommissionOnAFollowerGoesToTheLeader(t *testing.T) {
	f := newClusterFixture(t)
	f.store.leading, f.store.leaderID = false, "n2"
	f.peers.decom = func(c noderpc.DecomCall) (noderpc.DecomResult, error) {
		if c.ID == "n3" {
			return noderpc.DecomResult{Status: 409, Error: "refused", Verdict: controllerVerdict("n3", "dead_owner")}, nil
		}
		if c.DryRun {
			v := controllerVerdict(c.ID)
			v.Moves = []controller.PlannedMove{{Topic: "orders", Partition: 2, From: c.ID, To: "n1"}}
			return noderpc.DecomResult{Status: 200, Verdict: v}, nil
		}
		return noderpc.DecomResult{Status: 204}, nil
	}
	status, body := f.do(t, "POST", "/v1/cluster/members/n4/decommission?dry_run=true")
	if status != 200 || body["allowed"] != true {
		t.Fatalf("dry run: %d %v", status, body)
	}
	want := []any{map[string]any{"topic": "orders", "partition": float64(2), "from": "n4", "to": "n1"}}
	if !reflect.DeepEqual(body["moves"], want) {
		t.Fatalf("dry run moves = %v, want the leader's plan %v", body["moves"], want)
	}
	if status, body := f.do(t, "POST", "/v1/cluster/members/n3/decommission"); status != 409 || body["reasons"].([]any)[0] != "dead_owner" {
		t.Fatalf("refusal: %d %v", status, body)
	}
	if status, _ := f.do(t, "DELETE", "/v1/cluster/members/n4/decommission"); status != 204 {
		t.Fatalf("cancel: %d", status)
	}
	if calls := f.peers.decomCalls; len(calls) != 3 || !calls[0].DryRun || !calls[2].Cancel {
		t.Fatalf("op 25 calls %+v", calls)
	}
	// Leadership moved (421), the leader unreachable, no leader at all: 503.
	f.peers.decom = func(noderpc.DecomCall) (noderpc.DecomResult, error) {
		return noderpc.DecomResult{Status: 421, Error: "not the raft leader"}, nil
	}
	if status, _ := f.do(t, "POST", "/v1/cluster/members/n4/decommission"); status != 503 {
		t.Fatalf("421 from the leader: %d", status)
	}
	f.peers.decom = nil
	if status, _ := f.do(t, "POST", "/v1/cluster/members/n4/decommission"); status != 503 {
		t.Fatalf("unreachable leader: %d", status)
	}
	f.store.leaderID = ""
	if status, body := f.do(t, "POST", "/v1/cluster/members/n4/decommission"); status != 503 || body["error"] == nil {
		t.Fatalf("no leader: %d %v", status, body)
	}
	if a := f.audits(t); len(a) != 4 || a[len(a)-1]["outcome"] != "unknown" {
		t.Fatalf("audits %v: want ok for the cancel, then unknown for each 503", a)
	}
}

func controllerVerdict(node string, reasons ...string) controller.Verdict {
	return controller.Verdict{Node: node, Allowed: len(reasons) == 0, Reasons: reasons}
}

func TestMembersShowTheLeadersDecommissionBlockedReasons(t *testing.T) {
	cases := []struct {
		name          string
		stage         func(f *clusterFixture)
		wantReachable bool
		wantN4        []string // nil: field absent
	}{
		{"on the leader", func(f *clusterFixture) {
			f.decom.blocked = map[string][]string{"n4": {"ingress_backlog", "leader_transfer"}}
		}, true, []string{"ingress_backlog", "leader_transfer"}},
		{"on a follower via op 25", func(f *clusterFixture) {
			f.store.leading, f.store.leaderID = false, "n2"
			f.peers.decom = func(c noderpc.DecomCall) (noderpc.DecomResult, error) {
				if !c.BlockedOnly {
					return noderpc.DecomResult{}, errors.New("want blocked_only")
				}
				return noderpc.DecomResult{Status: 200, Blocked: map[string][]string{"n4": {"move_target"}}}, nil
			}
		}, true, []string{"move_target"}},
		{"leader unreachable", func(f *clusterFixture) {
			f.store.leading, f.store.leaderID = false, "n2"
		}, false, nil},
		{"no leader", func(f *clusterFixture) {
			f.store.leading, f.store.leaderID = false, ""
		}, false, nil},
		{"leadership moved under the question", func(f *clusterFixture) {
			f.store.leading, f.store.leaderID = false, "n2"
			f.peers.decom = func(noderpc.DecomCall) (noderpc.DecomResult, error) { return noderpc.DecomResult{Status: 421}, nil }
		}, false, nil},
		{"older leader without op 25", func(f *clusterFixture) {
			f.store.leading, f.store.leaderID = false, "n2"
			f.peers.decom = func(noderpc.DecomCall) (noderpc.DecomResult, error) {
				return noderpc.DecomResult{}, fmt.Errorf("%w: %w", meta.ErrNoLeader, noderpc.ErrPeerTooOld)
			}
		}, true, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newClusterFixture(t)
			f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n4", Target: "n1"})
			tc.stage(f)
			status, body := f.do(t, "GET", "/v1/cluster/members")
			if status != 200 || body["leader_reachable"] != tc.wantReachable {
				t.Fatalf("%d %v", status, body)
			}
			var got api.MemberList
			if err := json.Unmarshal(mustJSON(t, body), &got); err != nil {
				t.Fatal(err)
			}
			for _, m := range got.Members {
				raw := string(mustJSON(t, m))
				if !tc.wantReachable {
					if strings.Contains(raw, "decommission_blocked") {
						t.Fatalf("unreachable leader but %s", raw)
					}
					continue
				}
				want := []string{}
				if m.ID == "n4" {
					want = tc.wantN4
				}
				if !strings.Contains(raw, `"decommission_blocked":`+string(mustJSON(t, want))) {
					t.Fatalf("member %s, want decommission_blocked %v", raw, want)
				}
				if m.ID == "n4" && (m.Status != "draining" || m.OwnedPartitions != 1 || m.OutboundMoves != 1) {
					t.Fatalf("n4 %+v", m)
				}
				if m.ID == "n3" && m.Status != "dead" {
					t.Fatalf("a dead draining member shows %q", m.Status)
				}
			}
		})
	}
}

// A member whose decommission finished (draining, out of Raft, owning and receiving nothing)
// is listed as removed, dead or alive; one still in Raft, owning a partition or receiving a
// move keeps its dead/draining status.
func TestMembersListAFinishedDecommissionAsRemoved(t *testing.T) {
	f := newClusterFixture(t)
	f.store.members = append(f.store.members,
		meta.Member{ID: "n5", ClusterAddr: "c5", Status: meta.MemberAlive, Draining: true},
		meta.Member{ID: "n6", ClusterAddr: "c6", Status: meta.MemberDead, Draining: true},
		meta.Member{ID: "n7", ClusterAddr: "c7", Status: meta.MemberDead, Draining: true},
		meta.Member{ID: "n8", ClusterAddr: "c8", Status: meta.MemberDead})
	f.store.roles = map[string]string{"n1": meta.RaftVoter, "n2": meta.RaftVoter, "n3": meta.RaftNone,
		"n4": meta.RaftVoter, "n5": meta.RaftNone, "n6": meta.RaftNone, "n7": meta.RaftNone, "n8": meta.RaftNone}
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 0, Owner: "n6"})
	f.store.assign(meta.Assignment{Topic: "orders", Partition: 1, Owner: "n1", Target: "n7"})
	status, body := f.do(t, "GET", "/v1/cluster/members")
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	var got api.MemberList
	if err := json.Unmarshal(mustJSON(t, body), &got); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, m := range got.Members {
		statuses[m.ID] = m.Status
	}
	want := map[string]string{"n1": "alive", "n2": "alive", "n3": "removed", "n4": "draining",
		"n5": "removed", "n6": "dead", "n7": "dead", "n8": "dead"}
	if !reflect.DeepEqual(statuses, want) {
		t.Fatalf("statuses %v, want %v", statuses, want)
	}
}
