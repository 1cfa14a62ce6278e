package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
)

// fakeClusterPartitions is what fakeCluster.Partitions answers, deliberately unsorted: t/1 is
// under-replicated, u/0 has no leader, a/2 is unreplicated.
var fakeClusterPartitions = []PartitionReplicas{
	{Topic: "t", Partition: 10, Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", ISR: []string{"n1", "n2", "n3"}, ReplicationFactor: 3, MinInsyncReplicas: 2},
	{Topic: "t", Partition: 1, Replicas: []string{"n2", "n3", "n1"}, Leader: "n2", LeaderEpoch: 4, ISR: []string{"n2"}, ReplicationFactor: 3, MinInsyncReplicas: 2, UnderReplicated: true, UnderMinISR: true},
	{Topic: "u", Partition: 0, Replicas: []string{"n1", "n2"}, ISR: []string{"n1"}, ReplicationFactor: 2, MinInsyncReplicas: 2, UnderReplicated: true, UnderMinISR: true},
	{Topic: "a", Partition: 2, Replicas: []string{"n1"}, Leader: "n1", ISR: []string{"n1"}, ReplicationFactor: 1, MinInsyncReplicas: 1},
}

func (f *fakeCluster) Partitions(context.Context) []PartitionReplicas {
	return append([]PartitionReplicas{}, fakeClusterPartitions...)
}

// listPartitions runs GET /v1/cluster/partitions with query q as bob (no grant) and decodes it.
func listPartitions(t *testing.T, env *testEnv, q string) partitionList {
	t.Helper()
	rec := env.do("GET", "/v1/cluster/partitions"+q, "bob", nil)
	expectStatus(t, rec, 200)
	var l partitionList
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func names(l partitionList) string {
	s := ""
	for _, p := range l.Partitions {
		s += fmt.Sprintf("%s/%d ", p.Topic, p.Partition)
	}
	return s
}

// GET /v1/cluster/partitions lists every partition in (topic, partition) order, only the
// under-replicated ones on request, page by page; bad parameters are 400 JSON errors.
func TestClusterPartitionsListFiltersAndPages(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.Cluster = &fakeCluster{} })
	expectStatus(t, env.do("GET", "/v1/cluster/partitions", "", nil), 401)

	all := listPartitions(t, env, "")
	if got := names(all); got != "a/2 t/1 t/10 u/0 " || all.NextPageToken != "" {
		t.Fatalf("all: %q next %q", got, all.NextPageToken)
	}
	rec := env.do("GET", "/v1/cluster/partitions?under_replicated=true", "bob", nil)
	want := `{"partitions":[` +
		`{"topic":"t","partition":1,"replicas":["n2","n3","n1"],"leader":"n2","leader_epoch":4,"isr":["n2"],"replication_factor":3,"min_insync_replicas":2,"under_replicated":true,"under_min_isr":true},` +
		`{"topic":"u","partition":0,"replicas":["n1","n2"],"leader":"","leader_epoch":0,"isr":["n1"],"replication_factor":2,"min_insync_replicas":2,"under_replicated":true,"under_min_isr":true}` +
		`],"next_page_token":""}` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Fatalf("under_replicated=true: %d %s", rec.Code, rec.Body.String())
	}
	if got := names(listPartitions(t, env, "?under_replicated=false")); got != "a/2 t/1 t/10 u/0 " {
		t.Fatalf("under_replicated=false: %q", got)
	}

	// Pages of two, then of one under-replicated partition.
	var seen string
	tok := ""
	for i := 0; ; i++ {
		l := listPartitions(t, env, "?limit=2&page_token="+url.QueryEscape(tok))
		seen += names(l)
		if tok = l.NextPageToken; tok == "" {
			break
		}
		if i > 3 {
			t.Fatal("paging does not end")
		}
	}
	if seen != "a/2 t/1 t/10 u/0 " {
		t.Fatalf("pages of 2: %q", seen)
	}
	first := listPartitions(t, env, "?under_replicated=true&limit=1")
	if names(first) != "t/1 " || first.NextPageToken != "t/1" {
		t.Fatalf("first under-replicated page: %q next %q", names(first), first.NextPageToken)
	}
	if l := listPartitions(t, env, "?under_replicated=true&limit=1&page_token=t%2F1"); names(l) != "u/0 " || l.NextPageToken != "" {
		t.Fatalf("second under-replicated page: %q next %q", names(l), l.NextPageToken)
	}
	if l := listPartitions(t, env, "?page_token=t%2F2"); names(l) != "t/10 u/0 " {
		t.Fatalf("after t/2 (numeric order): %q", names(l))
	}

	for _, q := range []string{"?under_replicated=yes", "?under_replicated=1", "?under_replicated=true&under_replicated=true",
		"?limit=0", "?limit=x", "?page_token=t", "?page_token=t%2Fx", "?page_token=%2F1", "?page_token=t%2F-1",
		"?page_token=a%20b%2F1"} {
		expectStatus(t, env.do("GET", "/v1/cluster/partitions"+q, "bob", nil), 400)
	}
}

// FuzzPartitionToken: any page_token is either refused or names a valid topic and a
// non-negative partition whose own token reads back to the same position.
func FuzzPartitionToken(f *testing.F) {
	for _, s := range []string{"", "t/1", "orders.v2/107", "t/", "/1", "t/-1", "t/1/2", "a b/1", "t/99999999999", "t/+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := parsePartitionToken(tok)
		if err != nil || p == nil {
			if tok == "" && (err != nil || p != nil) {
				t.Fatalf("empty token: %v %v", p, err)
			}
			return
		}
		if !validTopicName(p.Topic) || p.Partition < 0 {
			t.Fatalf("%q accepted as %+v", tok, p)
		}
		again, err := parsePartitionToken(partitionToken(*p))
		if err != nil || again == nil || again.Topic != p.Topic || again.Partition != p.Partition {
			t.Fatalf("%q → %+v → %q → %+v, %v", tok, p, partitionToken(*p), again, err)
		}
	})
}
