package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func decodeBody(t *testing.T, s seen) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s.Body), &m); err != nil {
		t.Fatalf("body %q: %v", s.Body, err)
	}
	return m
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:7942", "ftp://x", "http://", "://"} {
		if _, err := New(u); !errors.Is(err, ErrBadBaseURL) {
			t.Errorf("New(%q) err = %v", u, err)
		}
	}
	c, err := New("http://lb.example:7942/prefix/")
	if err != nil || c.BaseURL() != "http://lb.example:7942/prefix" {
		t.Fatalf("got %v, %v", c, err)
	}
}

func TestBasicAuthIsSentWhenConfigured(t *testing.T) {
	f := newFake(t, 200, `{"topics":[],"next_page_token":""}`)
	if _, _, err := f.client(t, WithBasicAuth("alice", "s3cret")).ListTopics(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	if got := f.last(t).Header.Get("Authorization"); got != "Basic YWxpY2U6czNjcmV0" {
		t.Fatalf("Authorization = %q", got)
	}
	if _, _, err := f.client(t).ListTopics(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	if got := f.last(t).Header.Get("Authorization"); got != "" {
		t.Fatalf("unexpected Authorization %q", got)
	}
}

func TestCreateTopicRetentionPointerDistinguishesDefaultFromForever(t *testing.T) {
	f := newFake(t, 201, `{"name":"o","partitions":3,"retention_ms":0,"role":"standalone","created_at":1}`)
	c := f.client(t)
	if _, err := c.CreateTopic(context.Background(), CreateTopicRequest{Name: "o"}); err != nil {
		t.Fatal(err)
	}
	if m := decodeBody(t, f.last(t)); !reflect.DeepEqual(m, map[string]any{"name": "o"}) {
		t.Fatalf("default create sent %v", m)
	}
	tp, err := c.CreateTopic(context.Background(), CreateTopicRequest{Name: "o", RetentionMs: ptr(int64(0)), Partitions: 6, Parent: "p", FanoutDelayMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeBody(t, f.last(t))
	if v, ok := m["retention_ms"]; !ok || v != float64(0) || m["partitions"] != float64(6) || m["parent"] != "p" || m["fanout_delay_ms"] != float64(5) {
		t.Fatalf("forever create sent %v", m)
	}
	if tp.Name != "o" || tp.Role != RoleStandalone || tp.Partitions != 3 {
		t.Fatalf("topic = %+v", tp)
	}
}

func TestAlterTopicSendsOnlySuppliedFields(t *testing.T) {
	f := newFake(t, 200, `{"name":"o","partitions":6,"role":"standalone"}`)
	c := f.client(t)
	if _, err := c.AlterTopic(context.Background(), "o", AlterTopicRequest{}); !errors.Is(err, ErrNothingToAlter) || f.count() != 0 {
		t.Fatalf("empty alter: err %v, %d calls", err, f.count())
	}
	if _, err := c.AlterTopic(context.Background(), "o", AlterTopicRequest{Partitions: ptr(6), RetentionMs: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	s := f.last(t)
	if s.Method != http.MethodPatch || s.Path != "/v1/topics/o" {
		t.Fatalf("%s %s", s.Method, s.Path)
	}
	if m := decodeBody(t, s); !reflect.DeepEqual(m, map[string]any{"partitions": float64(6), "retention_ms": float64(0)}) {
		t.Fatalf("body %v", m)
	}
}

func TestAllTopicsPagesThroughWithMaxLimit(t *testing.T) {
	f := newFake(t, 0, "")
	f.reply = func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("page_token") {
		case "":
			fmt.Fprint(w, `{"topics":[{"name":"a"},{"name":"b"}],"next_page_token":"b"}`)
		case "b":
			fmt.Fprint(w, `{"topics":[{"name":"c"}],"next_page_token":""}`)
		default:
			w.WriteHeader(400)
		}
	}
	all, err := f.client(t).AllTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[2].Name != "c" || f.count() != 2 {
		t.Fatalf("got %+v in %d calls", all, f.count())
	}
	if f.last(t).Query.Get("limit") != "1000" {
		t.Fatalf("limit = %q", f.last(t).Query.Get("limit"))
	}
}

func TestAllTopicsStopsOnRepeatedToken(t *testing.T) {
	f := newFake(t, 200, `{"topics":[{"name":"a"}],"next_page_token":"a"}`)
	if _, err := f.client(t).AllTopics(context.Background()); err == nil || f.count() != 2 {
		t.Fatalf("err %v after %d calls", err, f.count())
	}
}

func TestGetTopicDecodesStatsAndSendsPartition(t *testing.T) {
	f := newFake(t, 200, `{"name":"o","partitions":3,"role":"parent","children":["c"],"partition_stats":[`+
		`{"index":1,"owner_node":"n1","available":true,"segments":2,"oldest_offset":4,"next_offset":10,"high_watermark":9,"size_bytes":100,"oldest_segment_at":5}]}`)
	d, err := f.client(t).GetTopic(context.Background(), "o", ptr(1))
	if err != nil {
		t.Fatal(err)
	}
	want := PartitionStat{Index: 1, OwnerNode: "n1", Available: true, Segments: 2, OldestOffset: 4, NextOffset: 10, HighWatermark: 9, SizeBytes: 100, OldestSegmentAt: 5}
	if d.Name != "o" || d.Children[0] != "c" || len(d.PartitionStats) != 1 || !reflect.DeepEqual(d.PartitionStats[0], want) {
		t.Fatalf("detail = %+v", d)
	}
	if f.last(t).Query.Get("partition") != "1" {
		t.Fatalf("query = %v", f.last(t).Query)
	}
}

func TestProduceSendsRawBodyKeyAndPartition(t *testing.T) {
	f := newFake(t, 202, "")
	body := []byte("\x00raw bytes\xff")
	if err := f.client(t).Produce(context.Background(), "orders", body, ProduceOptions{Key: "k 1&", Partition: ptr(2)}); err != nil {
		t.Fatal(err)
	}
	s := f.last(t)
	if s.Path != "/v1/topics/orders/produce" || s.Body != string(body) || s.Query.Get("key") != "k 1&" || s.Query.Get("partition") != "2" {
		t.Fatalf("request = %+v", s)
	}
	if err := f.client(t).Produce(context.Background(), "orders", body, ProduceOptions{}); err != nil {
		t.Fatal(err)
	}
	if q := f.last(t).Query; len(q) != 0 {
		t.Fatalf("keyless produce sent %v", q)
	}
}

func TestProduceBatchReturnsAcceptedAndIndexOnError(t *testing.T) {
	f := newFake(t, 202, `{"accepted":2}`)
	n, err := f.client(t).ProduceBatch(context.Background(), "t", []BatchRecord{
		NewBatchRecord("a", []byte(`{"x":1}`)), {Partition: ptr(1), Payload: json.RawMessage(`"AAE="`), PayloadEncoding: "base64"}})
	if err != nil || n != 2 {
		t.Fatalf("got %d, %v", n, err)
	}
	s := f.last(t)
	if s.Path != "/v1/topics/t/produce/batch" || !strings.Contains(s.Body, `{"key":"a","payload":{"x":1}}`) ||
		!strings.Contains(s.Body, `{"partition":1,"payload":"AAE=","payload_encoding":"base64"}`) {
		t.Fatalf("body %s", s.Body)
	}
	f.status, f.body = 400, `{"error":"bad record","index":1}`
	_, err = f.client(t).ProduceBatch(context.Background(), "t", []BatchRecord{NewBatchRecord("", []byte("a"))})
	var e *Error
	if !errors.As(err, &e) || e.Index == nil || *e.Index != 1 {
		t.Fatalf("err = %#v", err)
	}
	if _, err := f.client(t).ProduceBatch(context.Background(), "t", nil); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty batch err = %v", err)
	}
}

func TestChildrenEndpoints(t *testing.T) {
	f := newFake(t, 200, `{"name":"p","role":"parent","children":["c"]}`)
	c := f.client(t)
	if _, err := c.Attach(context.Background(), "p", "c", 60000); err != nil {
		t.Fatal(err)
	}
	if s := f.last(t); s.Path != "/v1/topics/p/children" || !reflect.DeepEqual(decodeBody(t, s), map[string]any{"child": "c", "delay_ms": float64(60000)}) {
		t.Fatalf("attach sent %s %s", s.Path, s.Body)
	}
	f.status, f.body = 204, ""
	if err := c.Detach(context.Background(), "p", "c"); err != nil || f.last(t).Method != "DELETE" || f.last(t).Path != "/v1/topics/p/children/c" {
		t.Fatalf("detach: %v %+v", err, f.last(t))
	}
	f.status, f.body = 200, `{"parent":"p","children":[{"name":"c","link":"local","delay_ms":0,"attach_epoch":"67953471cc57a32a","state":"active","lag_messages":12,"lag_complete":true,"cursors":[{"parent_partition":0,"owner_node":"n1","next_offset":1900,"high_watermark":1904}]}]}`
	l, err := c.Children(context.Background(), "p")
	if err != nil || len(l.Children) != 1 || l.Children[0].Cursors[0].HighWatermark != 1904 || l.Children[0].LagMessages != 12 {
		t.Fatalf("children: %+v %v", l, err)
	}
}

func TestUserEndpoints(t *testing.T) {
	f := newFake(t, 201, `{"username":"bob","grants":[{"action":"produce","patterns":["o*"]}],"created_at_ms":5}`)
	c := f.client(t)
	u, err := c.CreateUser(context.Background(), CreateUserRequest{Username: "bob", Password: "pw", Grants: []Grant{{Action: ActionProduce, Patterns: []string{"o*"}}}})
	if err != nil || u.Username != "bob" || u.Grants[0].Patterns[0] != "o*" {
		t.Fatalf("create: %+v %v", u, err)
	}
	f.status, f.body = 200, `{"username":"bob"}`
	if _, err := c.SetGrants(context.Background(), "bob", nil); err != nil {
		t.Fatal(err)
	}
	if s := f.last(t); s.Method != "PUT" || s.Path != "/v1/users/bob/grants" || strings.TrimSpace(s.Body) != `{"grants":[]}` {
		t.Fatalf("grants sent %s %s %s", s.Method, s.Path, s.Body)
	}
	f.status, f.body = 204, ""
	if err := c.SetPassword(context.Background(), "bob", "new", ""); err != nil {
		t.Fatal(err)
	}
	if s := f.last(t); s.Path != "/v1/users/bob/password" || strings.TrimSpace(s.Body) != `{"new_password":"new"}` {
		t.Fatalf("password sent %s %s", s.Path, s.Body)
	}
	if err := c.DeleteUser(context.Background(), "bob"); err != nil || f.last(t).Method != "DELETE" {
		t.Fatalf("delete: %v", err)
	}
	f.status, f.body = 200, `[{"username":"admin","grants":[{"action":"admin"}],"root":true},{"username":"bob"}]`
	users, err := c.ListUsers(context.Background())
	if err != nil || len(users) != 2 || !users[0].Root || users[0].Grants[0].Action != ActionAdmin {
		t.Fatalf("list: %+v %v", users, err)
	}
	f.status, f.body = 404, `{"error":"user not found"}`
	if _, err := c.GetUser(context.Background(), "zed"); !IsStatus(err, 404) || f.last(t).Path != "/v1/users/zed" {
		t.Fatalf("get: %v", err)
	}
}

func TestClusterEndpoints(t *testing.T) {
	f := newFake(t, 200, `{"members":[{"id":"n1","addr":"a:1","status":"alive","draining":false,"raft_role":"voter","owned_partitions":3,"outbound_moves":0,"last_heartbeat":9,"decommission_blocked":[]}],"leader_reachable":true}`)
	c := f.client(t)
	ml, err := c.ClusterMembers(context.Background())
	if err != nil || len(ml.Members) != 1 || ml.Members[0].DecommissionBlocked == nil || !ml.LeaderReachable {
		t.Fatalf("members: %+v %v", ml, err)
	}
	f.body = `{"node":"n1","dry_run":true,"allowed":false,"reasons":["min_voters"]}`
	v, err := c.Decommission(context.Background(), "n1", true)
	if err != nil || v.Allowed || v.Reasons[0] != "min_voters" || f.last(t).Query.Get("dry_run") != "true" {
		t.Fatalf("dry run: %+v %v", v, err)
	}
	f.status, f.body = 204, ""
	if v, err := c.Decommission(context.Background(), "n1", false); err != nil || v != nil || f.last(t).Query.Has("dry_run") {
		t.Fatalf("decommission: %+v %v", v, err)
	}
	if err := c.CancelDecommission(context.Background(), "n1"); err != nil || f.last(t).Method != "DELETE" || f.last(t).Path != "/v1/cluster/members/n1/decommission" {
		t.Fatalf("cancel: %v", err)
	}
	f.status, f.body = 200, `{"moves":[{"topic":"o","partition":2,"from":"n1","to":"n2","from_status":"alive","to_status":"dead","blocked":["target_dead"],"detail":{"phase":"copying","copied_bytes":10}}]}`
	mv, err := c.Moves(context.Background(), true)
	if err != nil || len(mv) != 1 || mv[0].Detail.Phase != "copying" || f.last(t).Query.Get("detail") != "true" {
		t.Fatalf("moves: %+v %v", mv, err)
	}
	f.status, f.body = 202, `{"topic":"o","partition":2,"owner":"n1","aborted_target":"n2"}`
	ar, err := c.AbortMove(context.Background(), "o", 2, "n2")
	if err != nil || ar.AbortedTarget != "n2" || f.last(t).Path != "/v1/cluster/moves/o/2/abort" || f.last(t).Query.Get("target") != "n2" {
		t.Fatalf("abort: %+v %v", ar, err)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	f := newFake(t, 200, `{"status":"ok"}`)
	if s, err := f.client(t).Healthz(context.Background()); err != nil || s != "ok" || f.last(t).Path != "/healthz" {
		t.Fatalf("healthz: %q %v", s, err)
	}
	f.status, f.body = 503, `{"error":"catching up"}`
	if _, err := f.client(t).Readyz(context.Background()); !IsStatus(err, 503) || err.Error() != "http 503: catching up" {
		t.Fatalf("readyz: %v", err)
	}
}

func TestPathSegmentsAreEscaped(t *testing.T) {
	f := newFake(t, 204, "")
	if err := f.client(t).DeleteTopic(context.Background(), "a/b c"); err != nil {
		t.Fatal(err)
	}
	if s := f.last(t); s.Raw != "/v1/topics/a%2Fb%20c" {
		t.Fatalf("escaped path = %q", s.Raw)
	}
}
