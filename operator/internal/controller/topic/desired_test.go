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

func TestParseLagReadsOnlyTheTopicsSeries(t *testing.T) {
	text := []byte(`# HELP narad_consumer_lag_messages hwm - (committed frontier + 1).
# TYPE narad_consumer_lag_messages gauge
narad_consumer_lag_messages{partition="0",topic="orders"} 12
narad_consumer_lag_messages{partition="2",topic="orders"} 3
narad_consumer_lag_messages{partition="0",topic="orders-audit"} 99
# TYPE narad_consumer_lag_messages_other gauge
narad_consumer_lag_messages_other{partition="1",topic="orders"} 5
`)
	got := parseLag(text, "orders")
	if len(got) != 2 || got[0] != 12 || got[2] != 3 {
		t.Fatalf("parseLag = %v", got)
	}
	// An exposition the parser refuses yields nothing (the caller then uses its upper bound).
	broken := append(append([]byte(nil), text...), []byte("narad_consumer_lag_messages{partition=\"1\",topic=\"orders\"} \n")...)
	if got := parseLag(broken, "orders"); len(got) != 0 {
		t.Fatalf("parseLag of a malformed exposition = %v, want nothing", got)
	}
}

func FuzzParseLag(f *testing.F) {
	f.Add([]byte("# TYPE narad_consumer_lag_messages gauge\nnarad_consumer_lag_messages{partition=\"0\",topic=\"orders\"} 12\n"), "orders")
	f.Add([]byte("narad_consumer_lag_messages{partition=\"-1\",topic=\"orders\"} NaN\n"), "orders")
	f.Add([]byte("narad_consumer_lag_messages{partition=\"3\",topic=\"o\"} 1e300\n"), "o")
	f.Fuzz(func(t *testing.T, text []byte, topic string) {
		for p, v := range parseLag(text, topic) {
			if p < 0 || v < 0 {
				t.Fatalf("parseLag gave partition %d = %d", p, v)
			}
		}
	})
}
