package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func envFor(t *testing.T, f *fakeAPI) map[string]string {
	return map[string]string{EnvAddr: f.srv.URL, EnvConfigDir: t.TempDir()}
}

func TestTopicRmAnsweringNoDoesNotDelete(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("DELETE /v1/topics/orders", 204, "")
	for _, answer := range []string{"n\n", "\n", "", "nope\n"} {
		r := runCLI(context.Background(), testApp(envFor(t, f)), answer, "topic", "rm", "orders")
		if r.code != 0 || !strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stderr, "aborted") {
			t.Fatalf("answer %q: %+v", answer, r)
		}
	}
	if n := len(f.callsTo("DELETE", "/v1/topics/orders")); n != 0 {
		t.Fatalf("DELETE called %d times after refusals", n)
	}
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "y\n", "topic", "rm", "orders"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "rm", "-f", "orders"); r.code != 0 || strings.Contains(r.stderr, "[y/N]") {
		t.Fatalf("-f: %+v", r)
	}
	if n := len(f.callsTo("DELETE", "/v1/topics/orders")); n != 2 {
		t.Fatalf("DELETE called %d times, want 2", n)
	}
}

func TestErrorsPrintNaradHTTPStatusAndExit1(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics/ghost", 404, `{"error":"topic not found"}`+"\n")
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "info", "ghost")
	if r.code != 1 || r.stderr != "narad: http 404: topic not found\n" || r.stdout != "" {
		t.Fatalf("got %+v", r)
	}
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "nosuch")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "narad: ") {
		t.Fatalf("unknown command: %+v", r)
	}
}

func TestTopicAddSendsFlagsAndPrettyPrintsTheTopic(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/topics", 201, `{"name":"o","partitions":6,"retention_ms":0,"visibility_timeout_ms":30000,"role":"child","parent":"p","created_at":1}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "add", "o", "--partitions", "6", "--retention", "0",
		"--visibility", "45s", "--parent", "p", "--delay", "1h", "--max-in-flight", "10", "--max-acked-ahead", "20")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(f.callsTo("POST", "/v1/topics")[0].Body), &body)
	want := map[string]any{"name": "o", "partitions": 6.0, "retention_ms": 0.0, "visibility_timeout_ms": 45000.0, "parent": "p",
		"fanout_delay_ms": 3_600_000.0, "max_in_flight_per_partition": 10.0, "max_acked_ahead_per_partition": 20.0}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body = %v", body)
	}
	if !strings.Contains(r.stdout, "\n  \"name\": \"o\",\n") {
		t.Fatalf("not pretty-printed:\n%s", r.stdout)
	}
}

func TestTopicAddDelayWithoutParentFailsBeforeAnyCall(t *testing.T) {
	f := newFakeAPI(t)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "add", "o", "--delay", "1h")
	if r.code != 1 || r.stderr != "narad: --delay requires --parent\n" || len(f.allCalls()) != 0 {
		t.Fatalf("got %+v, %d calls", r, len(f.allCalls()))
	}
}

func TestTopicEditNeedsAFlagAndSendsOnlyGivenFields(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("PATCH /v1/topics/o", 200, `{"name":"o","partitions":9,"role":"standalone"}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "edit", "o"); r.code != 1 || len(f.allCalls()) != 0 {
		t.Fatalf("no-flag edit: %+v", r)
	}
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "edit", "o", "--partitions", "9", "--retention", "forever"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if got := f.callsTo("PATCH", "/v1/topics/o")[0].Body; strings.TrimSpace(got) != `{"partitions":9,"retention_ms":0}` {
		t.Fatalf("body = %s", got)
	}
}

func TestTopicLsPagesAndShowsForeverRetention(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/topics", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page_token") == "" {
			reply(w, 200, `{"topics":[{"name":"a","partitions":3,"retention_ms":0,"role":"parent"}],"next_page_token":"a"}`)
			return
		}
		reply(w, 200, `{"topics":[{"name":"b","partitions":6,"retention_ms":604800000,"role":"standalone"}],"next_page_token":""}`)
	})
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "ls")
	if r.code != 0 || !containsLine(r.stdout, "a", "3", "forever", "parent") || !containsLine(r.stdout, "b", "6", "7d", "standalone") {
		t.Fatalf("ls:\n%s%s", r.stdout, r.stderr)
	}
	if q := f.callsTo("GET", "/v1/topics")[0].Query; q.Get("limit") != "1000" {
		t.Fatalf("limit = %v", q)
	}
}

func TestPubTakesBodyFromArgFileOrStdinAndReportsRate(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/topics/t/produce", 202, "")
	file := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(file, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"pub", "t", "from-arg"}, "", "from-arg"},
		{[]string{"pub", "t", "--file", file}, "", "from-file"},
		{[]string{"pub", "t", "-"}, "from-stdin", "from-stdin"},
		{[]string{"pub", "t"}, "implicit-stdin", "implicit-stdin"},
	}
	for _, tc := range cases {
		before := len(f.callsTo("POST", "/v1/topics/t/produce"))
		r := runCLI(context.Background(), testApp(envFor(t, f)), tc.stdin, tc.args...)
		calls := f.callsTo("POST", "/v1/topics/t/produce")
		if r.code != 0 || len(calls) != before+1 || calls[len(calls)-1].Body != tc.want {
			t.Fatalf("%v: %+v", tc.args, r)
		}
		if !strings.Contains(r.stderr, "accepted 1 message(s)") || !strings.Contains(r.stderr, "msg/s") {
			t.Fatalf("%v: stderr %q", tc.args, r.stderr)
		}
	}
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "pub", "t", "x", "-k", "key1", "--partition", "2", "--count", "3")
	calls := f.callsTo("POST", "/v1/topics/t/produce")
	last := calls[len(calls)-1]
	if r.code != 0 || !strings.Contains(r.stderr, "accepted 3 message(s)") || last.Query.Get("key") != "key1" || last.Query.Get("partition") != "2" {
		t.Fatalf("count/key/partition: %+v %+v", r, last)
	}
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "pub", "t", "x", "--file", file); r.code != 1 {
		t.Fatalf("arg and file together accepted: %+v", r)
	}
}

func TestTopicRmOfAParentNeedsDetachChildren(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("DELETE /v1/topics/orders", 409, `{"error":"topic \"orders\" has children orders-late","children":["orders-late"]}`+"\n")
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "rm", "-f", "orders")
	if r.code != 1 || !strings.Contains(r.stderr, "--detach-children") || !strings.Contains(r.stderr, "orders-late") {
		t.Fatalf("-f on a parent: %+v", r)
	}
	if got := f.callsTo("DELETE", "/v1/topics/orders")[0].Query; got.Has("detach_children") {
		t.Fatalf("-f alone sent detach_children: %v", got)
	}
	f = newFakeAPI(t)
	f.fixed("DELETE /v1/topics/orders", 200, `{"deleted":"orders","detached_children":[{"name":"orders-late","link":"local","delay_ms":60000,"undelivered_messages":7,"undelivered_complete":true}]}`+"\n")
	r = runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "rm", "-f", "--detach-children", "orders")
	if r.code != 0 || !strings.Contains(r.stderr, `detached local child "orders-late" (delay 60000 ms): 7 undelivered messages dropped`) {
		t.Fatalf("--detach-children: %+v", r)
	}
	if got := f.callsTo("DELETE", "/v1/topics/orders")[0].Query.Get("detach_children"); got != "true" {
		t.Fatalf("detach_children=%q, want true", got)
	}
}

func TestTopicAddSendsTheReplicationFlags(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("POST /v1/topics", 201, `{"name":"o","partitions":3,"replication_factor":3,"min_insync_replicas":2,"role":"standalone","created_at":1}`)
	r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "add", "o", "--partitions", "3",
		"--replication-factor", "3", "--min-insync", "2", "--unclean-leader-election")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(f.callsTo("POST", "/v1/topics")[0].Body), &body)
	want := map[string]any{"name": "o", "partitions": 3.0, "replication_factor": 3.0, "min_insync_replicas": 2.0,
		"unclean_leader_election": true}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body = %v", body)
	}
}

func TestTopicEditSendsTheReplicationSettings(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("PATCH /v1/topics/o", 200, `{"name":"o","partitions":3,"role":"standalone","replication_factor":2}`)
	if r := runCLI(context.Background(), testApp(envFor(t, f)), "", "topic", "edit", "o", "--replication-factor", "2",
		"--min-insync", "1", "--unclean-leader-election=false"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	want := `{"replication_factor":2,"min_insync_replicas":1,"unclean_leader_election":false}`
	if got := f.callsTo("PATCH", "/v1/topics/o")[0].Body; strings.TrimSpace(got) != want {
		t.Fatalf("body = %s, want %s", got, want)
	}
}
