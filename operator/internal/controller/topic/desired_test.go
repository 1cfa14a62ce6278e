package topic

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

func i64(v int64) *int64 { return &v }

func TestDriftAlterGrowsNeverShrinksAndSetsOnlyWhatSpecSets(t *testing.T) {
	broker := client.Topic{Partitions: 6, RetentionMs: 604_800_000, VisibilityTimeoutMs: 30_000,
		MaxInFlightPerPartition: 1024, MaxAckedAheadPerPartition: 1024}
	cases := []struct {
		name       string
		spec       naradv1.TopicSpec
		wantAlter  string
		wantShrink bool
	}{
		{"in line", naradv1.TopicSpec{Partitions: 6}, "", false},
		{"grow", naradv1.TopicSpec{Partitions: 8}, "partitions=8", false},
		{"shrink refused", naradv1.TopicSpec{Partitions: 3}, "", true},
		{"unset fields keep the broker's", naradv1.TopicSpec{Partitions: 6, RetentionMs: nil}, "", false},
		{"retention forever", naradv1.TopicSpec{Partitions: 6, RetentionMs: i64(0)}, "retention_ms=0", false},
		{"limits", naradv1.TopicSpec{Partitions: 6, VisibilityTimeoutMs: i64(5), MaxInFlightPerPartition: i64(1024),
			MaxAckedAheadPerPartition: i64(7)}, "visibility_timeout_ms=5, max_acked_ahead_per_partition=7", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, shrink := driftAlter(c.spec, broker)
			if got := describeAlter(req); got != c.wantAlter || shrink != c.wantShrink {
				t.Fatalf("driftAlter = %q shrink %v, want %q shrink %v", got, shrink, c.wantAlter, c.wantShrink)
			}
		})
	}
}

func i32(v int32) *int32 { return &v }

// The replication settings are altered where spec sets them and the broker differs; an
// unreplicated broker topic that omits replication_factor reads as 1.
func TestDriftAlterSetsReplicationWhereSpecDiffers(t *testing.T) {
	r1 := client.Topic{Partitions: 3, MinInsyncReplicas: 1}
	r3 := client.Topic{Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 2}
	cases := []struct {
		name   string
		spec   naradv1.TopicSpec
		broker client.Topic
		want   string
	}{
		{"unset keeps the broker's", naradv1.TopicSpec{Partitions: 3}, r3, ""},
		{"R1 in line with an omitted factor", naradv1.TopicSpec{Partitions: 3, ReplicationFactor: i32(1)}, r1, ""},
		{"R3 M2 in line", naradv1.TopicSpec{Partitions: 3, ReplicationFactor: i32(3), MinInSyncReplicas: i32(2)}, r3, ""},
		{"raise R", naradv1.TopicSpec{Partitions: 3, ReplicationFactor: i32(4)}, r3, "replication_factor=4"},
		{"lower R and M", naradv1.TopicSpec{Partitions: 3, ReplicationFactor: i32(2), MinInSyncReplicas: i32(1)}, r3,
			"replication_factor=2, min_insync_replicas=1"},
		{"R1 to 2 is asked for (the brokers refuse it)", naradv1.TopicSpec{Partitions: 3, ReplicationFactor: i32(2)}, r1, "replication_factor=2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := driftAlter(c.spec, c.broker)
			if got := describeAlter(req); got != c.want {
				t.Fatalf("driftAlter = %q, want %q", got, c.want)
			}
		})
	}
	base, repl := splitReplication(client.AlterTopicRequest{Partitions: new(6), ReplicationFactor: new(3), MinInsyncReplicas: new(2)})
	if describeAlter(base) != "partitions=6" || describeAlter(repl) != "replication_factor=3, min_insync_replicas=2" {
		t.Fatalf("split %q / %q", describeAlter(base), describeAlter(repl))
	}
	req := createRequest(&naradv1.Topic{Spec: naradv1.TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: i32(3), MinInSyncReplicas: i32(2)}})
	if req.ReplicationFactor != 3 || req.MinInsyncReplicas != 2 {
		t.Fatalf("createRequest replication = %d/%d, want 3/2", req.ReplicationFactor, req.MinInsyncReplicas)
	}
}

func TestSchemaStampIgnoresKeyOrderAndFollowsTheIncarnation(t *testing.T) {
	a, err := canonicalSchema(&runtime.RawExtension{Raw: []byte(`{"type":"object", "properties":{"n":{"maximum":1e400}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := canonicalSchema(&runtime.RawExtension{Raw: []byte(`{"properties":{"n":{"maximum":1e400}},"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) || string(a) != `{"properties":{"n":{"maximum":1e400}},"type":"object"}` {
		t.Fatalf("canonical forms differ: %s vs %s", a, b)
	}
	if schemaStamp("i1", a) != schemaStamp("i1", b) || schemaStamp("i1", a) == schemaStamp("i2", a) {
		t.Fatal("stamp must depend on the document's meaning and on the incarnation only")
	}
	if _, err := canonicalSchema(nil); err != errNoSchema {
		t.Fatalf("nil schema: %v", err)
	}
}
