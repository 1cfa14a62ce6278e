package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Spec §2.9: consume grant (403) → query syntax (400) → existence (404) → partition range /
// offset without partition (400) → read.
func TestConsumeCheckOrder(t *testing.T) {
	cases := []struct {
		name, user, path string
		want             int
	}{
		{"grant before query syntax", "bob", "/v1/topics/orders-missing/consume?wait=bad", 403},
		{"query syntax before existence", "alice", "/v1/topics/orders-missing/consume?wait=5", 400},
		{"bad partition syntax before existence", "alice", "/v1/topics/orders-missing/consume?partition=x", 400},
		{"negative offset is syntax", "alice", "/v1/topics/orders-missing/consume?partition=0&offset=-1", 400},
		{"max_messages zero is syntax", "alice", "/v1/topics/orders-missing/consume?max_messages=0", 400},
		{"max_messages over 1000", "alice", "/v1/topics/orders-missing/consume?max_messages=1001", 400},
		{"repeated partition", "alice", "/v1/topics/orders-missing/consume?partition=1&partition=1", 400},
		{"existence before offset without partition", "alice", "/v1/topics/orders-missing/consume?offset=3", 404},
		{"existence before partition range", "alice", "/v1/topics/orders-missing/consume?partition=99", 404},
		{"offset without partition", "alice", "/v1/topics/orders/consume?offset=3", 400},
		{"partition out of range", "alice", "/v1/topics/orders/consume?partition=3", 400},
		{"negative partition out of range", "alice", "/v1/topics/orders/consume?partition=-1", 400},
		{"nothing available", "alice", "/v1/topics/orders/consume", 204},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			rec := env.do("GET", c.path, c.user, nil)
			expectStatus(t, rec, c.want)
			if c.want >= 400 && env.be.called("Consume") {
				t.Error("Consume reached on a refused request")
			}
			if c.want == 204 && rec.Body.Len() != 0 {
				t.Errorf("204 body %q", rec.Body.String())
			}
		})
	}
}

func TestParseWaitRules(t *testing.T) {
	const ceiling = 10 * time.Second
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"500ms", 500 * time.Millisecond, true},
		{"10s", 10 * time.Second, true},
		{"1m", ceiling, true},
		{"1h", ceiling, true},
		{"-5s", 0, true},
		{"-0", 0, true},
		{"5", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"10 s", 0, false},
	}
	for _, c := range cases {
		got, err := parseWait(c.in, ceiling)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseWait(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestConsumeModesReachBackend(t *testing.T) {
	cases := []struct {
		query string
		want  service.ConsumeRequest
	}{
		{"", service.ConsumeRequest{Partition: -1, Offset: -1, Wait: 0, Max: 1}},
		{"?wait=2s", service.ConsumeRequest{Partition: -1, Offset: -1, Wait: 2 * time.Second, Max: 1}},
		{"?wait=1h", service.ConsumeRequest{Partition: -1, Offset: -1, Wait: 3 * time.Second, Max: 1}},
		{"?partition=2&wait=1s", service.ConsumeRequest{Partition: 2, Offset: -1, Wait: time.Second, Max: 1}},
		{"?partition=1&offset=0&wait=5s&max_messages=7", service.ConsumeRequest{Partition: 1, Offset: 0, Wait: 0, Max: 7}},
		{"?max_messages=1000", service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1000}},
	}
	for _, c := range cases {
		env := newEnv(t, func(o *Options) { o.MaxConsumeWait = 3 * time.Second })
		env.be.addTopic(meta.Topic{Name: "orders"})
		env.do("GET", "/v1/topics/orders/consume"+c.query, "alice", nil)
		if len(env.be.consumed) != 1 || env.be.consumed[0] != c.want {
			t.Errorf("%s: backend got %+v, want %+v", c.query, env.be.consumed, c.want)
		}
	}
}

func TestConsumeEmptyIs204AndCounted(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	rec := env.do("GET", "/v1/topics/orders/consume?wait=1s", "alice", nil)
	expectStatus(t, rec, 204)
	if !slices.Equal(env.events.empty, []string{"orders"}) || !slices.Equal(env.events.waits, []string{"orders/timeout"}) {
		t.Errorf("events empty=%q waits=%q", env.events.empty, env.events.waits)
	}
}

func TestConsumeBackendErrorsMapToStatus(t *testing.T) {
	for err, want := range map[error]int{ErrGone: 410, ErrOwnerDown: 503} {
		env := newEnv(t)
		env.be.addTopic(meta.Topic{Name: "orders"})
		env.be.consumeFn = func(meta.Topic, service.ConsumeRequest) ([]service.Message, error) { return nil, err }
		expectStatus(t, env.do("GET", "/v1/topics/orders/consume?partition=0&offset=0", "alice", nil), want)
	}
}

// Spec §2.10 encoding table.
func TestPayloadEncodingRules(t *testing.T) {
	cases := []struct {
		name    string
		stored  []byte
		payload string // exact JSON text expected after "payload":
		b64     bool
	}{
		{"json object with whitespace verbatim", []byte("{ \"a\" :\n [1, 2] }"), "{ \"a\" :\n [1, 2] }", false},
		{"json string literal", []byte(`"hi"`), `"hi"`, false},
		{"text becomes json string", []byte("hi"), `"hi"`, false},
		{"json number", []byte("12.50"), "12.50", false},
		{"json null", []byte("null"), "null", false},
		{"json with surrounding whitespace", []byte(" true \n"), " true \n", false},
		{"text with quotes and newline", []byte("say \"x\"\n"), `"say \"x\"\n"`, false},
		{"utf8 text", []byte("héllo wörld"), `"héllo wörld"`, false},
		{"invalid utf8 is base64", []byte{0xff, 0xfe, 0x00}, `"` + base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0x00}) + `"`, true},
		{"json-looking but invalid utf8 is base64", []byte("\"\xff\""), `"` + base64.StdEncoding.EncodeToString([]byte("\"\xff\"")) + `"`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, b64 := appendPayload(nil, c.stored)
			if string(got) != c.payload || b64 != c.b64 {
				t.Errorf("appendPayload(%q) = %q b64=%v, want %q b64=%v", c.stored, got, b64, c.payload, c.b64)
			}
			// The consumer rule recovers the stored bytes (or their JSON value for strings).
			msg := appendMessage(nil, &service.Message{Topic: "t", Payload: c.stored})
			var m struct {
				Payload         json.RawMessage `json:"payload"`
				PayloadEncoding string          `json:"payload_encoding"`
			}
			if err := json.Unmarshal(msg, &m); err != nil {
				t.Fatalf("message %q is not JSON: %v", msg, err)
			}
			if m.PayloadEncoding == "base64" {
				var s string
				_ = json.Unmarshal(m.Payload, &s)
				dec, _ := base64.StdEncoding.DecodeString(s)
				if string(dec) != string(c.stored) {
					t.Errorf("base64 round trip %q != %q", dec, c.stored)
				}
			}
		})
	}
}

func TestMessageFieldsInDocumentedOrder(t *testing.T) {
	m := service.Message{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("k"), Payload: []byte{0xff},
		CommittedAtMs: 1700000000999, ReceiptHandle: "2:41:7"}
	want := `{"topic":"orders","partition":2,"offset":41,"key":"k","payload":"/w==","payload_encoding":"base64","timestamp":1700000000,"receipt_handle":"2:41:7"}`
	if got := string(appendMessage(nil, &m)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	replay := service.Message{Topic: "orders", Offset: 1, Payload: []byte("{}"), CommittedAtMs: 5000}
	want = `{"topic":"orders","partition":0,"offset":1,"payload":{},"timestamp":5}`
	if got := string(appendMessage(nil, &replay)); got != want {
		t.Errorf("keyless replay: got %s, want %s", got, want)
	}
}

// Spec §6.1: max_messages absent or 1 → one Message object; ≥ 2 → {"messages":[...]}.
func TestConsumeResponseShapeFollowsMaxMessages(t *testing.T) {
	msgs := []service.Message{
		{Topic: "orders", Partition: 0, Offset: 1, Payload: []byte(`{"a":1}`), ReceiptHandle: "0:1:1"},
		{Topic: "orders", Partition: 1, Offset: 9, Payload: []byte(`x`), ReceiptHandle: "1:9:2"},
	}
	cases := []struct {
		query string
		want  string
	}{
		{"", `{"topic":"orders","partition":0,"offset":1,"payload":{"a":1},"timestamp":0,"receipt_handle":"0:1:1"}`},
		{"?max_messages=1", `{"topic":"orders","partition":0,"offset":1,"payload":{"a":1},"timestamp":0,"receipt_handle":"0:1:1"}`},
		{"?max_messages=2", `{"messages":[{"topic":"orders","partition":0,"offset":1,"payload":{"a":1},"timestamp":0,"receipt_handle":"0:1:1"},{"topic":"orders","partition":1,"offset":9,"payload":"x","timestamp":0,"receipt_handle":"1:9:2"}]}`},
	}
	for _, c := range cases {
		env := newEnv(t)
		env.be.addTopic(meta.Topic{Name: "orders"})
		env.be.consumeFn = func(_ meta.Topic, req service.ConsumeRequest) ([]service.Message, error) {
			return msgs[:min(req.Max, len(msgs))], nil
		}
		rec := env.do("GET", "/v1/topics/orders/consume"+c.query, "alice", nil)
		expectStatus(t, rec, 200)
		if rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != c.want+"\n" {
			t.Errorf("%s: body %s, want %s", c.query, rec.Body.String(), c.want)
		}
	}
}

func TestParseConsumeQueryInvariants(t *testing.T) {
	cases := map[string]bool{
		"":                                  true,
		"wait=1s&partition=0&offset=5":      true,
		"max_messages=1000":                 true,
		"max_messages=1.5":                  false,
		"offset=99999999999999999999":       false,
		"partition=1&offset=0&offset=1":     false,
		"wait=1s&wait=2s":                   false,
		"unrelated=1&partition=2":           true,
		"partition=-7":                      true, // range-checked after the 404
		"partition=99999999999999999999999": false,
	}
	for q, ok := range cases {
		vals, _ := url.ParseQuery(q)
		cq, err := parseConsumeQuery(valuesParams(vals, nil), time.Second)
		if (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", q, err, ok)
			continue
		}
		if err != nil && statusOf(err) != 400 {
			t.Errorf("%q: status %d, want 400", q, statusOf(err))
		}
		if err == nil && (cq.Max < 1 || cq.Max > 1000 || cq.Wait < 0 || cq.Wait > time.Second) {
			t.Errorf("%q: out-of-bounds result %+v", q, cq)
		}
	}
}

func TestLongPollOutcomeLabels(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		ctx  context.Context
		n    int
		err  error
		want string
	}{
		{live, 1, nil, "hit"},
		{live, 0, nil, "timeout"},
		{gone, 0, context.Canceled, "cancelled"},
		{gone, 0, nil, "cancelled"},
		{gone, 2, nil, "hit"},
	}
	for _, c := range cases {
		if got := waitOutcome(c.ctx, c.n, c.err); got != c.want {
			t.Errorf("waitOutcome(n=%d, err=%v) = %s, want %s", c.n, c.err, got, c.want)
		}
	}
}

// Everything the backend returned goes back to the node's answer budget once the answer is
// written, also the messages cut to max_messages and those of an empty answer; a spent budget
// is a 503 with Retry-After and a JSON error.
func TestConsumeReleasesItsAnswerAndAnswersASpentBudgetWith503(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	msgs := []service.Message{
		{Topic: "orders", Offset: 1, Payload: []byte("a"), ReceiptHandle: "0:1:1"},
		{Topic: "orders", Offset: 2, Payload: []byte("b"), ReceiptHandle: "0:2:1"},
	}
	env.be.consumeFn = func(meta.Topic, service.ConsumeRequest) ([]service.Message, error) { return msgs, nil }
	expectStatus(t, env.do("GET", "/v1/topics/orders/consume?max_messages=1", "alice", nil), 200)
	env.be.mu.Lock()
	released := env.be.released
	env.be.mu.Unlock()
	if len(released) != 1 || len(released[0]) != 2 {
		t.Fatalf("released %v; want the two messages the backend returned", released)
	}

	env.be.consumeFn = func(meta.Topic, service.ConsumeRequest) ([]service.Message, error) {
		return nil, fmt.Errorf("%w: answers spent", ErrBusy)
	}
	rec := env.do("GET", "/v1/topics/orders/consume", "alice", nil)
	expectStatus(t, rec, 503)
	if rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"error":"memory budget exhausted: answers spent"`) {
		t.Fatalf("spent budget answered %q, Retry-After %q", rec.Body.String(), rec.Header().Get("Retry-After"))
	}
}

// Messages the consumer can no longer receive are requeued, not left leased: the request's
// context ended before the answer was written, or the write of a large answer failed.
func TestConsumeRequeuesAnAnswerItCannotDeliver(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	small := []service.Message{{Topic: "orders", Offset: 1, Payload: []byte("a"), ReceiptHandle: "0:1:1"}}
	env.be.consumeFn = func(meta.Topic, service.ConsumeRequest) ([]service.Message, error) { return small, nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("GET", "/v1/topics/orders/consume", nil).WithContext(ctx)
	req.SetBasicAuth("alice", "pw-alice")
	rec := httptest.NewRecorder()
	env.h.ServeHTTP(rec, req)
	if rec.Body.Len() != 0 {
		t.Fatalf("answered a gone consumer: %d %s", rec.Code, rec.Body.String())
	}

	large := []service.Message{{Topic: "orders", Offset: 2, Payload: bytes.Repeat([]byte("b"), 4000), ReceiptHandle: "0:2:1"}}
	env.be.consumeFn = func(meta.Topic, service.ConsumeRequest) ([]service.Message, error) { return large, nil }
	req = httptest.NewRequest("GET", "/v1/topics/orders/consume", nil)
	req.SetBasicAuth("alice", "pw-alice")
	env.h.ServeHTTP(failingWriter{httptest.NewRecorder()}, req)

	env.be.mu.Lock()
	defer env.be.mu.Unlock()
	if len(env.be.requeued) != 2 || env.be.requeued[0][0].Offset != 1 || env.be.requeued[1][0].Offset != 2 {
		t.Fatalf("requeued %+v; want the answer of the gone consumer, then the one whose write failed", env.be.requeued)
	}
	if len(env.be.released) != 2 {
		t.Fatalf("released %d answers, want both", len(env.be.released))
	}
}

// failingWriter is a ResponseWriter whose body writes fail, as on a connection the client
// closed.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }
