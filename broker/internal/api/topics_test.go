package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"narad.dev/broker/internal/meta"
)

// Each case fails at one step while every later step would fail too, proving the order of
// docs/internals/http-api.md §2.2: JSON (413/400) → create grant (403) → manage right on parent (403) → field
// validation (400) → parent existence (404) → conflicts (409).
func TestCreateTopicCheckOrder(t *testing.T) {
	big := `{"name":"orders-x","owner":"` + strings.Repeat("a", maxJSONBody) + `"}`
	cases := []struct {
		name, user, body string
		want             int
	}{
		{"oversized body before grant", "bob", big, 413},
		{"bad json before grant", "bob", `{"name":`, 400},
		{"unknown field before grant", "bob", `{"name":"x","colour":"red"}`, 400},
		{"wrong type before grant", "bob", `{"name":5}`, 400},
		{"two values before grant", "bob", `{"name":"x"} {}`, 400},
		{"create grant before field validation", "bob", `{"name":"x","partitions":-1}`, 403},
		{"create grant is name based even for invalid input", "alice", `{"name":"other","partitions":1}`, 403},
		{"parent manage right before field validation", "alice", `{"name":"orders-c","parent":"rootowned","partitions":1}`, 403},
		{"field validation before parent existence", "alice", `{"name":"orders-c","parent":"nope","partitions":1}`, 400},
		{"parent existence before conflicts", "alice", `{"name":"orders","parent":"nope"}`, 404},
		{"conflict last", "alice", `{"name":"orders"}`, 409},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
			env.be.addTopic(meta.Topic{Name: "rootowned", Owner: "root"})
			expectStatus(t, env.do("POST", "/v1/topics", c.user, []byte(c.body)), c.want)
		})
	}
}

func TestCreateTopicFieldValidation(t *testing.T) {
	long := strings.Repeat("a", 256)
	cases := []struct {
		body string
		want int
	}{
		{`{}`, 400},
		{`{"name":""}`, 400},
		{`{"name":"."}`, 400},
		{`{"name":".."}`, 400},
		{`{"name":"a/b"}`, 400},
		{`{"name":"` + long + `"}`, 400},
		{`{"name":"` + long[:255] + `"}`, 201},
		{`{"name":"ok.name_1-2"}`, 201},
		{`{"name":"p","partitions":2}`, 400},
		{`{"name":"p","partitions":109}`, 400},
		{`{"name":"p","partitions":108}`, 201},
		{`{"name":"p","partitions":-3}`, 400},
		{`{"name":"p","partitions":3.5}`, 400},
		{`{"name":"r","retention_ms":-1}`, 400},
		{`{"name":"r","retention_ms":1}`, 400},
		{`{"name":"r","retention_ms":3599999}`, 400},
		{`{"name":"r","retention_ms":3600000}`, 201},
		{`{"name":"r","retention_ms":0}`, 201},
		{`{"name":"v","visibility_timeout_ms":-1}`, 400},
		{`{"name":"v","max_in_flight_per_partition":-1}`, 400},
		{`{"name":"v","max_acked_ahead_per_partition":-1}`, 400},
		{`{"name":"d","fanout_delay_ms":1000}`, 400},
		{`{"name":"d","parent":"d"}`, 400},
		{`{"name":"d","parent":"base","fanout_delay_ms":-1}`, 400},
		{`{"name":"d","parent":"base","fanout_delay_ms":31536000001}`, 400},
		{`{"name":"d","parent":"base","fanout_delay_ms":31536000000}`, 201},
		{`{"name":"o","owner":"someone"}`, 201},
		{`{"name":"s","schema":{"type":"object"}}`, 201},
		{`{"name":"s","schema":{"type":17}}`, 400},
	}
	for _, c := range cases {
		t.Run(c.body[:min(len(c.body), 60)], func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "base"})
			expectStatus(t, env.do("POST", "/v1/topics", "root", []byte(c.body)), c.want)
		})
	}
}

func TestCreateTopicRetentionAbsentIsDefaultZeroIsForever(t *testing.T) {
	env := newEnv(t)
	expectStatus(t, env.do("POST", "/v1/topics", "root", []byte(`{"name":"a"}`)), 201)
	expectStatus(t, env.do("POST", "/v1/topics", "root", []byte(`{"name":"b","retention_ms":0}`)), 201)
	if env.be.created[0].RetentionMs != nil {
		t.Errorf("absent retention_ms passed as %d, want nil", *env.be.created[0].RetentionMs)
	}
	if r := env.be.created[1].RetentionMs; r == nil || *r != 0 {
		t.Errorf("retention_ms 0 passed as %v, want pointer to 0", r)
	}
}

func TestCreateTopicOwnerIsCallerAndBodyOwnerIgnored(t *testing.T) {
	env := newEnv(t)
	rec := env.do("POST", "/v1/topics", "alice", []byte(`{"name":"orders-new","owner":"mallory"}`))
	expectStatus(t, rec, 201)
	var got TopicObject
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Owner != "alice" || got.Role != meta.RoleStandalone {
		t.Errorf("owner %q role %q, want alice standalone", got.Owner, got.Role)
	}
	if strings.Contains(rec.Body.String(), "incarnation") {
		t.Errorf("internal field leaked: %s", rec.Body.String())
	}
}

func TestListTopicsLimitRules(t *testing.T) {
	env := newEnv(t)
	for i := 0; i < 1005; i++ {
		env.be.addTopic(meta.Topic{Name: fmt.Sprintf("t%04d", i)})
	}
	cases := []struct {
		query   string
		status  int
		count   int
		hasNext bool
	}{
		{"", 200, 100, true},
		{"?limit=5000", 200, 1000, true},
		{"?limit=1000", 200, 1000, true},
		{"?limit=1", 200, 1, true},
		{"?limit=0", 400, 0, false},
		{"?limit=-1", 400, 0, false},
		{"?limit=abc", 400, 0, false},
		{"?limit=", 400, 0, false},
		{"?limit=1&limit=2", 400, 0, false},
		{"?limit=10&page_token=t1000", 200, 4, false},
	}
	for _, c := range cases {
		rec := env.do("GET", "/v1/topics"+c.query, "bob", nil)
		expectStatus(t, rec, c.status)
		if c.status != 200 {
			continue
		}
		var got topicList
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Topics) != c.count || (got.NextPageToken != "") != c.hasNext {
			t.Errorf("%s: %d topics, next %q; want %d, next=%v", c.query, len(got.Topics), got.NextPageToken, c.count, c.hasNext)
		}
	}
}

func TestListTopicsEmptyIsArrayNotNull(t *testing.T) {
	env := newEnv(t)
	rec := env.do("GET", "/v1/topics", "bob", nil)
	expectStatus(t, rec, 200)
	if got := strings.TrimSpace(rec.Body.String()); got != `{"topics":[],"next_page_token":""}` {
		t.Errorf("body %s", got)
	}
}

func TestDescribeTopicPartitionRules(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders", Partitions: 4, Incarnation: "00000000000000a1"})
	cases := []struct {
		path string
		want int
		n    int
	}{
		{"/v1/topics/orders", 200, 4},
		{"/v1/topics/orders?partition=2", 200, 1},
		{"/v1/topics/orders?partition=4", 400, 0},
		{"/v1/topics/orders?partition=-1", 400, 0},
		{"/v1/topics/orders?partition=x", 400, 0},
		{"/v1/topics/missing?partition=x", 400, 0},  // syntax before existence
		{"/v1/topics/missing?partition=-1", 404, 0}, // range after existence
	}
	for _, c := range cases {
		rec := env.do("GET", c.path, "bob", nil)
		expectStatus(t, rec, c.want)
		if c.want != 200 {
			continue
		}
		var got describeObject
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.PartitionStats) != c.n {
			t.Fatalf("%s: %d stats, want %d", c.path, len(got.PartitionStats), c.n)
		}
		if got.Incarnation != "00000000000000a1" {
			t.Fatalf("%s: incarnation %q, want the topic's", c.path, got.Incarnation)
		}
		for i := 1; i < len(got.PartitionStats); i++ {
			if got.PartitionStats[i-1].Index > got.PartitionStats[i].Index {
				t.Errorf("partition_stats not sorted by index: %+v", got.PartitionStats)
			}
		}
	}
}

// Spec §2.5: JSON syntax and field validation (400/413) → manage right (403) → existence
// (404) → partition bounds against the current count (400) → conflicts (409).
func TestAlterTopicCheckOrder(t *testing.T) {
	cases := []struct {
		name, user, topic, body string
		want                    int
	}{
		{"unknown field before manage right", "bob", "rootowned", `{"name":"x"}`, 400},
		{"parent field rejected", "root", "orders", `{"parent":"x"}`, 400},
		{"fanout_delay_ms rejected", "root", "orders", `{"fanout_delay_ms":5}`, 400},
		{"empty object before manage right", "bob", "rootowned", `{}`, 400},
		{"zero partitions alone is empty", "root", "orders", `{"partitions":0}`, 400},
		{"negative partitions before manage right", "bob", "rootowned", `{"partitions":-4}`, 400},
		{"partitions over max before manage right", "bob", "rootowned", `{"partitions":109}`, 400},
		{"bad retention before manage right", "bob", "rootowned", `{"retention_ms":5}`, 400},
		{"invalid schema before manage right", "bob", "rootowned", `{"schema":{"type":17}}`, 400},
		{"manage right before existence", "bob", "rootowned", `{"partitions":2}`, 403},
		{"existence before partition bounds", "alice", "missing", `{"partitions":2}`, 404},
		{"equal partitions after existence", "alice", "orders", `{"partitions":3}`, 400},
		{"smaller partitions", "alice", "orders", `{"partitions":2}`, 400},
		{"incompatible schema is 400", "alice", "orders", `{"schema":{"type":"string"}}`, 400},
		{"schema on attached child is 409", "root", "orders-child", `{"schema":{"type":"object"}}`, 409},
		{"owner may alter", "alice", "orders", `{"partitions":4,"retention_ms":0}`, 200},
		{"visibility alterable", "alice", "orders", `{"visibility_timeout_ms":0}`, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
			env.be.addTopic(meta.Topic{Name: "rootowned", Owner: "root"})
			env.be.addTopic(meta.Topic{Name: "orders-child", Parent: "orders", Role: meta.RoleChild})
			env.be.schemas["orders"] = json.RawMessage(`{"type":"object"}`)
			expectStatus(t, env.do("PATCH", "/v1/topics/"+c.topic, c.user, []byte(c.body)), c.want)
			if c.want != 200 && env.be.called("AlterTopic") {
				t.Errorf("AlterTopic reached on a %d", c.want)
			}
		})
	}
}

func TestAlterTopicPassesPointerFields(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
	rec := env.do("PATCH", "/v1/topics/orders", "alice",
		[]byte(`{"retention_ms":0,"max_in_flight_per_partition":0,"visibility_timeout_ms":null}`))
	expectStatus(t, rec, 200)
	req := env.be.altered[0]
	if req.RetentionMs == nil || *req.RetentionMs != 0 || req.MaxInFlightPerPartition == nil ||
		req.VisibilityTimeoutMs != nil || req.MaxAckedAheadPerPartition != nil || req.Partitions != 0 {
		t.Errorf("alter request %+v", req)
	}
}

func TestAlterTopicBackendConflictIs409(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
	env.be.alterErr = fmt.Errorf("retention below delay child: %w", ErrConflict)
	expectStatus(t, env.do("PATCH", "/v1/topics/orders", "alice", []byte(`{"retention_ms":3600000}`)), 409)
}

func TestDeleteTopicManageRightThenExistence(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders-a", Owner: "root"})
	env.be.addTopic(meta.Topic{Name: "orders-b", Owner: "alice"})
	expectStatus(t, env.do("DELETE", "/v1/topics/orders-a", "alice", nil), 403)
	expectStatus(t, env.do("DELETE", "/v1/topics/missing", "alice", nil), 404)
	rec := env.do("DELETE", "/v1/topics/orders-b", "alice", nil)
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("owner delete = %d %q, want 204 empty", rec.Code, rec.Body.String())
	}
	expectStatus(t, env.do("DELETE", "/v1/topics/orders-a", "ops", nil), 204)
}

func TestTopicObjectShowsLinkFieldsOnlyForChildren(t *testing.T) {
	child := TopicObjectOf(meta.Topic{Name: "c", Partitions: 3, Role: meta.RoleChild, Parent: "p",
		AttachEpoch: "0123456789abcdef", AttachOffsets: []int64{4, 0, 9}, FanoutDelayMs: 60000, Incarnation: "x"})
	b, _ := json.Marshal(child)
	for _, f := range []string{`"parent":"p"`, `"attach_epoch":"0123456789abcdef"`, `"attach_offsets":[4,0,9]`, `"fanout_delay_ms":60000`, `"role":"child"`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("child object %s lacks %s", b, f)
		}
	}
	b, _ = json.Marshal(TopicObjectOf(meta.Topic{Name: "s", Partitions: 3}))
	want := `{"name":"s","partitions":3,"retention_ms":0,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":0,"role":"standalone","replication_factor":1,"min_insync_replicas":1,"unclean_leader_election":false}`
	if string(b) != want {
		t.Errorf("standalone object\n got %s\nwant %s", b, want)
	}
}

func TestMaxPartitionsOptionBoundsCreateAndAlter(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.MaxPartitions = 10 })
	env.be.addTopic(meta.Topic{Name: "orders", Owner: "alice"})
	expectStatus(t, env.do("POST", "/v1/topics", "root", []byte(`{"name":"a","partitions":11}`)), 400)
	expectStatus(t, env.do("POST", "/v1/topics", "root", []byte(`{"name":"a","partitions":10}`)), 201)
	expectStatus(t, env.do("PATCH", "/v1/topics/orders", "root", []byte(`{"partitions":11}`)), 400)
	expectStatus(t, env.do("PATCH", "/v1/topics/orders", "root", []byte(`{"partitions":10}`)), 200)
}

// The replication fields of an alter (docs/internals/http-api.md §2.5): stateless bounds are
// 400s naming the field before the manage right; R 1 ↔ ≥ 2 is 409 and M above the resulting R
// a 400 naming the field, both after existence; valid changes reach the backend.
func TestAlterTopicReplicationFields(t *testing.T) {
	cases := []struct {
		name, topic, body, field string
		want                     int
	}{
		{"R zero", "repl", `{"replication_factor":0}`, "replication_factor", 400},
		{"R six", "repl", `{"replication_factor":6}`, "replication_factor", 400},
		{"M negative", "repl", `{"min_insync_replicas":-1}`, "min_insync_replicas", 400},
		{"M above supplied R", "repl", `{"replication_factor":2,"min_insync_replicas":3}`, "min_insync_replicas", 400},
		{"M above current R", "repl", `{"min_insync_replicas":4}`, "min_insync_replicas", 400},
		{"R below current M", "strict", `{"replication_factor":2}`, "replication_factor", 400},
		{"R 3 to 1", "repl", `{"replication_factor":1}`, "", 409},
		{"R 1 to 3", "single", `{"replication_factor":3}`, "", 409},
		{"R 3 to 2", "repl", `{"replication_factor":2}`, "", 200},
		{"R 3 to 5 with M", "repl", `{"replication_factor":5,"min_insync_replicas":3}`, "", 200},
		{"unclean alone", "repl", `{"unclean_leader_election":true}`, "", 200},
		{"R 1 stays 1", "single", `{"replication_factor":1,"min_insync_replicas":1}`, "", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "repl", Owner: "alice", ReplicationFactor: 3})
			env.be.addTopic(meta.Topic{Name: "strict", Owner: "alice", ReplicationFactor: 3, MinInsyncReplicas: 3})
			env.be.addTopic(meta.Topic{Name: "single", Owner: "alice"})
			rec := env.do("PATCH", "/v1/topics/"+c.topic, "alice", []byte(c.body))
			expectStatus(t, rec, c.want)
			if c.field != "" && !strings.Contains(rec.Body.String(), `"field":"`+c.field+`"`) {
				t.Errorf("body %s does not name %s", rec.Body.String(), c.field)
			}
			if c.want != 200 && env.be.called("AlterTopic") {
				t.Errorf("AlterTopic reached on a %d", c.want)
			}
		})
	}
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "repl", Owner: "alice", ReplicationFactor: 3})
	expectStatus(t, env.do("PATCH", "/v1/topics/repl", "alice",
		[]byte(`{"replication_factor":2,"min_insync_replicas":1,"unclean_leader_election":false}`)), 200)
	req := env.be.altered[0]
	if req.ReplicationFactor == nil || *req.ReplicationFactor != 2 || req.MinInsyncReplicas == nil ||
		*req.MinInsyncReplicas != 1 || req.UncleanLeaderElection == nil || *req.UncleanLeaderElection {
		t.Errorf("alter request %+v", req)
	}
}

// FuzzAlterTopicReplication: the alter body's replication checks never panic; a body they pass
// carries R 1…5, M 0…5 (≤ R when both are given), and a change the stateful check then
// passes never moves R between 1 and ≥ 2 nor leaves M above R.
func FuzzAlterTopicReplication(f *testing.F) {
	f.Add([]byte(`{"replication_factor":3,"min_insync_replicas":2}`), 3, 0)
	f.Add([]byte(`{"replication_factor":1}`), 2, 2)
	f.Add([]byte(`{"min_insync_replicas":4,"unclean_leader_election":true}`), 5, 0)
	f.Fuzz(func(t *testing.T, body []byte, curR, curM int) {
		var b alterTopicBody
		if decodeStrict(body, &b) != nil {
			return
		}
		req, err := validateAlter(&b, 108)
		if err != nil {
			return
		}
		if r := req.ReplicationFactor; r != nil && (*r < 1 || *r > meta.MaxReplicationFactor) {
			t.Fatalf("R %d passed", *r)
		}
		if m := req.MinInsyncReplicas; m != nil && (*m < 0 || *m > meta.MaxReplicationFactor ||
			(req.ReplicationFactor != nil && *m > *req.ReplicationFactor)) {
			t.Fatalf("M %d passed with R %v", *m, req.ReplicationFactor)
		}
		cur := meta.Topic{Name: "t", ReplicationFactor: curR, MinInsyncReplicas: curM}
		if curR < 0 || curR > meta.MaxReplicationFactor || curM < 0 || curM > cur.RF() {
			return
		}
		if checkAlterReplication(cur, req) != nil {
			return
		}
		next := replicationAfter(cur, req)
		if (cur.RF() == 1) != (next.RF() == 1) || next.MinInsyncReplicas > next.RF() || next.ReplicationFactor == 1 {
			t.Fatalf("%+v → %+v passed", cur, next)
		}
	})
}
