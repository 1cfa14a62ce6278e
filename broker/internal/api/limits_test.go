package api

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"

	"narad.dev/broker/internal/meta"
)

// Every per-topic limit has a documented maximum; create and alter refuse a value above it
// (or the old favourite, 2^63-1) with a 400 whose body names the field.
func TestTopicLimitsHaveMaximaNamedInThe400(t *testing.T) {
	cases := []struct {
		field string
		max   int64
	}{
		{"visibility_timeout_ms", meta.MaxVisibilityTimeoutMs},
		{"retention_ms", meta.MaxRetentionMs},
		{"max_in_flight_per_partition", meta.MaxInFlightPerPartitionLimit},
		{"max_acked_ahead_per_partition", meta.MaxAckedAheadPerPartition},
	}
	for _, c := range cases {
		for _, v := range []int64{c.max + 1, math.MaxInt64} {
			t.Run(fmt.Sprintf("%s=%d", c.field, v), func(t *testing.T) {
				env := newEnv(t)
				env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
				create := fmt.Sprintf(`{"name":"orders-new","%s":%d}`, c.field, v)
				alter := fmt.Sprintf(`{"%s":%d}`, c.field, v)
				for _, rec := range []struct{ method, path, body string }{
					{"POST", "/v1/topics", create},
					{"PATCH", "/v1/topics/orders", alter},
				} {
					r := env.do(rec.method, rec.path, "alice", []byte(rec.body))
					expectStatus(t, r, 400)
					if body := expectJSONError(t, r); body["field"] != c.field {
						t.Fatalf("%s %s: error body %v does not name field %q", rec.method, rec.path, body, c.field)
					}
				}
				if env.be.called("CreateTopic") || env.be.called("AlterTopic") {
					t.Fatal("an out-of-range value reached the backend")
				}
			})
		}
		t.Run(c.field+" at its maximum", func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
			expectStatus(t, env.do("POST", "/v1/topics", "alice", []byte(fmt.Sprintf(`{"name":"orders-new","%s":%d}`, c.field, c.max))), 201)
			expectStatus(t, env.do("PATCH", "/v1/topics/orders", "alice", []byte(fmt.Sprintf(`{"%s":%d}`, c.field, c.max))), 200)
		})
	}
}

// Keys are UTF-8 text of at most 4 KiB, in single and batch produce alike: a key that is not
// valid UTF-8 (raw bytes, or a lone surrogate escape that a JSON decoder would turn into
// U+FFFD) is refused with a 400 naming "key", never stored altered.
func TestProduceKeysAreBoundedUTF8(t *testing.T) {
	long := strings.Repeat("k", maxKeyBytes+1)
	single := []struct {
		name, rawKey string
		want         int
	}{
		{"NUL and invalid bytes", "%00%ff%fe", 400},
		{"lone continuation byte", "a%80", 400},
		{"over 4 KiB", long, 400},
		{"exactly 4 KiB", long[1:], 202},
		{"valid multibyte with NUL", url.QueryEscape("\x00é☃😀"), 202},
	}
	for _, c := range single {
		t.Run("single/"+c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			r := env.do("POST", "/v1/topics/orders/produce?key="+c.rawKey, "alice", []byte("x"))
			expectStatus(t, r, c.want)
			if c.want == 400 {
				if body := expectJSONError(t, r); body["field"] != "key" {
					t.Fatalf("error body %v does not name field \"key\"", body)
				}
				return
			}
			want, _ := url.QueryUnescape(c.rawKey)
			if got := env.be.produced[0][0].Key; got != want {
				t.Fatalf("stored key %q, want exactly %q", got, want)
			}
		})
	}
	batch := []struct {
		name    string
		keyJSON []byte
		want    int
		stored  string
	}{
		{"raw invalid bytes", []byte("\"a\xff\xfe\""), 400, ""},
		{"lone high surrogate", []byte(`"a\ud800"`), 400, ""},
		{"lone low surrogate", []byte(`"\udc00b"`), 400, ""},
		{"reversed pair", []byte(`"\udc00\ud800"`), 400, ""},
		{"high then escaped quote", []byte(`"\ud800\""`), 400, ""},
		{"non-string key", []byte(`5`), 400, ""},
		{"over 4 KiB", []byte(`"` + long + `"`), 400, ""},
		{"surrogate pair", []byte(`"\ud83d\ude00"`), 202, "😀"},
		{"escaped NUL and replacement char sent on purpose", []byte(`"\u0000\ufffd"`), 202, "\x00\ufffd"},
		{"plain UTF-8", []byte(`"é☃"`), 202, "é☃"},
		{"null key is keyless", []byte(`null`), 202, ""},
	}
	for _, c := range batch {
		t.Run("batch/"+c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			body := bytes.Join([][]byte{[]byte(`{"records":[{"payload":"p"},{"key":`), c.keyJSON, []byte(`,"payload":"x"}]}`)}, nil)
			r := env.do("POST", "/v1/topics/orders/produce/batch", "alice", body)
			expectStatus(t, r, c.want)
			if c.want == 400 {
				eb := expectJSONError(t, r)
				if eb["index"] != float64(1) || (c.name != "non-string key" && eb["field"] != "key") {
					t.Fatalf("error body %v does not blame record 1's key", eb)
				}
				return
			}
			if got := env.be.produced[0][1].Key; got != c.stored {
				t.Fatalf("stored key %q, want exactly %q", got, c.stored)
			}
		})
	}
}

func TestReplicationFieldsOutOfRangeAre400NamingTheField(t *testing.T) {
	cases := []struct{ body, field string }{
		{`{"name":"orders-new","replication_factor":6}`, "replication_factor"},
		{`{"name":"orders-new","replication_factor":-1}`, "replication_factor"},
		{`{"name":"orders-new","replication_factor":3,"min_insync_replicas":4}`, "min_insync_replicas"},
		{`{"name":"orders-new","min_insync_replicas":6}`, "min_insync_replicas"},
		{`{"name":"orders-new","min_insync_replicas":-1}`, "min_insync_replicas"},
	}
	for _, c := range cases {
		env := newEnv(t)
		r := env.do("POST", "/v1/topics", "alice", []byte(c.body))
		expectStatus(t, r, 400)
		if body := expectJSONError(t, r); body["field"] != c.field {
			t.Fatalf("%s: error body %v does not name field %q", c.body, body, c.field)
		}
		if env.be.called("CreateTopic") {
			t.Fatalf("%s reached the backend", c.body)
		}
	}
}
