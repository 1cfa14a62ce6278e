package cli

import (
	"context"
	"strings"
	"testing"
)

const partitionsBody = `{"partitions":[` +
	`{"topic":"orders","partition":0,"replicas":["n1"],"leader":"n1","leader_epoch":0,"isr":["n1"],"replication_factor":1,"min_insync_replicas":1},` +
	`{"topic":"pay","partition":1,"replicas":["n2","n3","n1"],"leader":"n2","leader_epoch":4,"isr":["n2","n3"],"replication_factor":3,"min_insync_replicas":2,"under_replicated":true},` +
	`{"topic":"pay","partition":2,"replicas":["n3","n1","n2"],"leader":"n3","leader_epoch":1,"isr":["n3"],"replication_factor":3,"min_insync_replicas":2,"under_replicated":true,"under_min_isr":true},` +
	`{"topic":"pay","partition":3,"replicas":["n1","n2"],"leader":"","leader_epoch":2,"isr":[],"replication_factor":2,"min_insync_replicas":2,"under_replicated":true,"under_min_isr":true}` +
	`],"next_page_token":""}`

func TestClusterPartitionsPrintsReplicasISRAndStatus(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/partitions", 200, partitionsBody)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "partitions")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, line := range [][]string{
		{"TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "R", "M", "STATUS"},
		{"orders", "0", "n1", "0", "n1", "n1", "1", "1", "ok"},
		{"pay", "1", "n2", "4", "n2,n3,n1", "n2,n3", "3", "2", "under-replicated"},
		{"pay", "2", "n3", "1", "n3,n1,n2", "n3", "3", "2", "under-min-isr"},
		{"pay", "3", "-", "2", "n1,n2", "-", "2", "2", "no-leader"},
	} {
		if !containsLine(r.stdout, line...) {
			t.Fatalf("table lacks %v:\n%s", line, r.stdout)
		}
	}
	if q := f.callsTo("GET", "/v1/cluster/partitions")[0].Query; q.Has("under_replicated") {
		t.Fatalf("asked %v without --under-replicated", q)
	}
}

func TestClusterPartitionsUnderReplicatedJSONAndEmpty(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/cluster/partitions", 200, `{"partitions":[],"next_page_token":""}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "partitions", "--under-replicated")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "no under-replicated partitions" {
		t.Fatalf("empty: %+v", r)
	}
	if q := f.callsTo("GET", "/v1/cluster/partitions")[0].Query; q.Get("under_replicated") != "true" {
		t.Fatalf("query %v", q)
	}
	f.fixed("GET /v1/cluster/partitions", 200, partitionsBody)
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "partitions", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"under_min_isr": true`) || !strings.Contains(r.stdout, `"partitions": [`) {
		t.Fatalf("--json: %+v", r)
	}
	f.fixed("GET /v1/cluster/partitions", 400, `{"error":"query parameter \"under_replicated\" must be true or false"}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "cluster", "partitions"); r.code != 1 || !strings.Contains(r.stderr, "http 400") {
		t.Fatalf("400: %+v", r)
	}
}
