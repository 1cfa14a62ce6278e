package client

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// AllClusterPartitions pages with the server's tokens, passes the under_replicated flag and
// decodes every field.
func TestAllClusterPartitionsPagesAndDecodes(t *testing.T) {
	f := newFake(t, 200, "")
	f.reply = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("page_token") == "" {
			_, _ = io.WriteString(w, `{"partitions":[{"topic":"r","partition":1,"replicas":["n2","n3","n1"],"leader":"n2",`+
				`"leader_epoch":4,"isr":["n2"],"replication_factor":3,"min_insync_replicas":2,"under_replicated":true,"under_min_isr":true}],"next_page_token":"r/1"}`)
			return
		}
		_, _ = io.WriteString(w, `{"partitions":[{"topic":"u","partition":0,"replicas":["n1","n2"],"leader":"","isr":["n1"],`+
			`"replication_factor":2,"min_insync_replicas":1,"under_replicated":true}],"next_page_token":""}`)
	}
	ps, err := f.client(t).AllClusterPartitions(context.Background(), true)
	if err != nil || len(ps) != 2 {
		t.Fatalf("%+v %v", ps, err)
	}
	p := ps[0]
	if p.Topic != "r" || p.Partition != 1 || len(p.Replicas) != 3 || p.Leader != "n2" || p.LeaderEpoch != 4 ||
		len(p.ISR) != 1 || p.ReplicationFactor != 3 || p.MinInsyncReplicas != 2 || !p.UnderReplicated || !p.UnderMinISR {
		t.Fatalf("first: %+v", p)
	}
	if ps[1].Leader != "" || ps[1].UnderMinISR {
		t.Fatalf("second: %+v", ps[1])
	}
	q := f.last(t).Query
	if f.count() != 2 || q.Get("page_token") != "r/1" || q.Get("under_replicated") != "true" || q.Get("limit") != "1000" {
		t.Fatalf("requests: %d, last query %v", f.count(), q)
	}
}

// Without the flag no under_replicated parameter is sent, and an empty answer is an empty list;
// a server repeating its token is an error, not a loop.
func TestClusterPartitionsWithoutFlagAndARepeatedToken(t *testing.T) {
	f := newFake(t, 200, `{}`)
	ps, next, err := f.client(t).ClusterPartitions(context.Background(), false, 0, "")
	if err != nil || ps == nil || len(ps) != 0 || next != "" || len(f.last(t).Query) != 0 {
		t.Fatalf("%#v %q %v query %v", ps, next, err, f.last(t).Query)
	}
	f.reply = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"partitions":[],"next_page_token":"a/0"}`)
	}
	if _, err := f.client(t).AllClusterPartitions(context.Background(), false); err == nil {
		t.Fatal("a repeated page token did not stop the paging")
	}
}
