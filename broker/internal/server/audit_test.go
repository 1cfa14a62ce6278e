package server

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
)

func TestClusterEndpointsAuditActorTargetAndOutcome(t *testing.T) {
	f := newClusterFixture(t)
	if status, _ := f.do(t, "POST", "/v1/cluster/members/n4/decommission"); status != 204 {
		t.Fatalf("decommission: %d", status)
	}
	f.caller = &meta.User{Username: "bob"}
	if status, _ := f.do(t, "DELETE", "/v1/cluster/members/n4/decommission"); status != 403 {
		t.Fatalf("non-admin cancel: %d", status)
	}
	if status, _ := f.do(t, "POST", "/v1/cluster/moves/orders/1/abort"); status != 403 {
		t.Fatalf("non-admin abort: %d", status)
	}
	f.caller = rootCallerOff()
	if status, _ := f.do(t, "DELETE", "/v1/cluster/members/n4/decommission"); status != 204 {
		t.Fatalf("cancel with security off: %d", status)
	}
	want := []string{
		"cluster.decommission root n4 ok",
		"cluster.decommission.cancel bob n4 denied",
		"cluster.move.abort bob orders/1 denied",
		"cluster.decommission.cancel " + audit.ActorSecurityOff + " n4 ok",
	}
	var got []string
	for _, a := range f.audits(t) {
		got = append(got, strings.Join([]string{a["event"].(string), a["actor"].(string), a["target"].(string), a["outcome"].(string)}, " "))
		if a["node"] != "n1" || a["client"] == "" || a["client"] == nil {
			t.Errorf("record %v lacks node or client", a)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// rootCallerOff is the caller the API hands the cluster endpoints when security is off.
func rootCallerOff() *meta.User {
	return &meta.User{Root: true, Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
}

func TestJoinClusterAuditsTheAdmittedNode(t *testing.T) {
	s, _, _ := newNodeService(t)
	var buf logBuffer
	s.log = slog.New(slog.DiscardHandler)
	s.audit = audit.New(slog.New(slog.NewJSONHandler(&buf, nil)), "n1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := s.JoinCluster(ctx, &nodepb.JoinClusterRequest{Id: "n3", ClusterAddr: "127.0.0.1:9"})
	if err != nil || rep.Status != 200 {
		t.Fatalf("JoinCluster: %v %+v", err, rep)
	}
	// A repeated join of a node already in the configuration changes nothing: no record.
	if rep, err := s.JoinCluster(ctx, &nodepb.JoinClusterRequest{Id: "n3", ClusterAddr: "127.0.0.1:9"}); err != nil || rep.Status != 200 {
		t.Fatalf("second JoinCluster: %v %+v", err, rep)
	}
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "audit" {
			recs = append(recs, m)
		}
	}
	if len(recs) != 1 || recs[0]["event"] != "cluster.join" || recs[0]["actor"] != "node:n3" || recs[0]["target"] != "n3" ||
		recs[0]["outcome"] != "ok" || recs[0]["cluster_addr"] != "127.0.0.1:9" {
		t.Fatalf("audit records %v, want one cluster.join of n3", recs)
	}
}
