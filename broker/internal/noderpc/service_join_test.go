package noderpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/rpc/nodepb"
)

func TestJoinClusterAuditsTheAdmittedNode(t *testing.T) {
	s, _, _ := newNodeService(t)
	var buf bytes.Buffer
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
