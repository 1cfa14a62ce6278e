package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// schemaRejectsNonObjects is a ValidatePayload stand-in: payloads not starting with '{'
// violate the schema of topics whose name contains "schema".
func schemaRejectsNonObjects(t meta.Topic, p []byte) error {
	if strings.Contains(t.Name, "schema") && !bytes.HasPrefix(p, []byte("{")) {
		return fmt.Errorf("%w: not an object", ErrSchema)
	}
	return nil
}

// Spec §2.7: produce grant (403) → query (400) → body size (413) / empty (400) → existence
// (404) → delay child (409) → schema (400) → partition range (400) → accept (202).
func TestProduceCheckOrder(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), maxPayloadBytes+1)
	cases := []struct {
		name, user, path string
		body             []byte
		want             int
	}{
		{"grant before query", "bob", "/v1/topics/orders-missing/produce?partition=x", nil, 403},
		{"grant is name based", "alice", "/v1/topics/other/produce", []byte("x"), 403},
		{"query before body size", "alice", "/v1/topics/orders-missing/produce?key=a&key=b", huge, 400},
		{"partition twice", "alice", "/v1/topics/orders/produce?partition=1&partition=1", []byte("x"), 400},
		{"partition empty", "alice", "/v1/topics/orders/produce?partition=", []byte("x"), 400},
		{"partition negative before existence", "alice", "/v1/topics/orders-missing/produce?partition=-1", []byte("x"), 400},
		{"body size before existence", "alice", "/v1/topics/orders-missing/produce", huge, 413},
		{"empty body before existence", "alice", "/v1/topics/orders-missing/produce", nil, 400},
		{"existence before delay child", "alice", "/v1/topics/orders-missing/produce", []byte("x"), 404},
		{"delay child before schema", "alice", "/v1/topics/orders-delayed-schema/produce?partition=99", []byte("x"), 409},
		{"schema before partition range", "alice", "/v1/topics/orders-schema/produce?partition=99", []byte("x"), 400},
		{"partition range last", "alice", "/v1/topics/orders/produce?partition=3", []byte("x"), 400},
		{"non-delay child accepts produce", "alice", "/v1/topics/orders-child/produce", []byte("x"), 202},
		{"exactly 1 MiB accepted", "alice", "/v1/topics/orders/produce?partition=2", huge[:maxPayloadBytes], 202},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.validate = schemaRejectsNonObjects
			env.be.addTopic(meta.Topic{Name: "orders"})
			env.be.addTopic(meta.Topic{Name: "orders-schema"})
			env.be.addTopic(meta.Topic{Name: "orders-child", Parent: "orders", Role: meta.RoleChild})
			env.be.addTopic(meta.Topic{Name: "orders-delayed-schema", Parent: "orders", FanoutDelayMs: 60000, Role: meta.RoleChild})
			rec := env.do("POST", c.path, c.user, c.body)
			expectStatus(t, rec, c.want)
			if c.want != 202 && env.be.called("Produce") {
				t.Error("Produce reached on a refused request")
			}
			if c.want == 202 && rec.Body.Len() != 0 {
				t.Errorf("202 body %q, want empty", rec.Body.String())
			}
		})
	}
}

func TestProducePassesKeyPartitionAndBytesVerbatim(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	body := []byte("\x00\xffbinary")
	expectStatus(t, env.do("POST", "/v1/topics/orders/produce?key=k%201", "alice", body), 202)
	expectStatus(t, env.do("POST", "/v1/topics/orders/produce?key=k&partition=2", "alice", body), 202)
	expectStatus(t, env.do("POST", "/v1/topics/orders/produce?key=", "alice", body), 202)
	want := []service.ProduceRecord{
		{Key: "k 1", Partition: -1, Payload: body},
		{Key: "k", Partition: 2, Payload: body},
		{Key: "", Partition: -1, Payload: body},
	}
	for i, w := range want {
		got := env.be.produced[i][0]
		if got.Key != w.Key || got.Partition != w.Partition || !bytes.Equal(got.Payload, w.Payload) {
			t.Errorf("record %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestProduceRejectionsAreCountedByReasonOncePerRequest(t *testing.T) {
	env := newEnv(t)
	env.be.validate = schemaRejectsNonObjects
	env.be.addTopic(meta.Topic{Name: "orders-schema"})
	env.be.addTopic(meta.Topic{Name: "orders-d", Parent: "orders", FanoutDelayMs: 1, Role: meta.RoleChild})
	env.be.addTopic(meta.Topic{Name: "orders"})
	env.do("POST", "/v1/topics/orders-schema/produce", "alice", []byte("x"))
	env.do("POST", "/v1/topics/orders-d/produce", "alice", []byte("x"))
	env.do("POST", "/v1/topics/orders-schema/produce/batch", "alice", []byte(`{"records":[{"payload":{}},{"payload":1}]}`))
	env.be.produceErr = fmt.Errorf("%w", ErrDraining)
	expectStatus(t, env.do("POST", "/v1/topics/orders/produce", "alice", []byte("x")), 503)
	want := []string{"orders-schema/schema", "orders-d/delayed_child", "orders-schema/schema"}
	if !slices.Equal(env.events.rejected, want) {
		t.Errorf("rejections %q, want %q", env.events.rejected, want)
	}
}

// Spec §2.8: message bytes are the decoded base64, a JSON string's UTF-8 content, or the
// payload's JSON text exactly as sent.
func TestBatchProduceBytesRule(t *testing.T) {
	body := `{"records":[
		{"key":"customer-42","payload":{"order_id": "ord_1",  "n":[1, 2]}},
		{"payload":"plain text"},
		{"payload":"\"hi\""},
		{"partition":2,"payload":"AAEC/w==","payload_encoding":"base64"},
		{"payload":12.50},
		{"payload":true},
		{"payload":"caf\u00e9"},
		{"payload":[ ]}
	]}`
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	rec := env.do("POST", "/v1/topics/orders/produce/batch", "alice", []byte(body))
	expectStatus(t, rec, 202)
	if got := strings.TrimSpace(rec.Body.String()); got != `{"accepted":8}` {
		t.Errorf("body %s", got)
	}
	want := []service.ProduceRecord{
		{Key: "customer-42", Partition: -1, Payload: []byte(`{"order_id": "ord_1",  "n":[1, 2]}`)},
		{Partition: -1, Payload: []byte("plain text")},
		{Partition: -1, Payload: []byte(`"hi"`)},
		{Partition: 2, Payload: []byte{0, 1, 2, 0xff}},
		{Partition: -1, Payload: []byte("12.50")},
		{Partition: -1, Payload: []byte("true")},
		{Partition: -1, Payload: []byte("café")},
		{Partition: -1, Payload: []byte("[ ]")},
	}
	got := env.be.produced[0]
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Partition != want[i].Partition || !bytes.Equal(got[i].Payload, want[i].Payload) {
			t.Errorf("record %d = {%q %d %q}, want {%q %d %q}", i, got[i].Key, got[i].Partition, got[i].Payload,
				want[i].Key, want[i].Partition, want[i].Payload)
		}
	}
}

// A failing record is named by index, and nothing is accepted.
func TestBatchProduceReportsFirstFailingIndexAndAcceptsNothing(t *testing.T) {
	bigB64 := `"` + strings.Repeat("A", (maxPayloadBytes/3+1)*4) + `"`
	bigText := `"` + strings.Repeat("x", maxPayloadBytes+1) + `"`
	cases := []struct {
		name, topic, records string
		want, index          int
	}{
		{"null payload", "orders", `{"payload":"a"},{"payload":null}`, 400, 1},
		{"missing payload", "orders", `{"key":"k"}`, 400, 0},
		{"unknown record field", "orders", `{"payload":"a"},{"payload":"a","extra":1}`, 400, 1},
		{"wrong key type", "orders", `{"payload":"a","key":5}`, 400, 0},
		{"bad encoding name", "orders", `{"payload":"a"},{"payload":"AA==","payload_encoding":"hex"}`, 400, 1},
		{"empty encoding name", "orders", `{"payload":"AA==","payload_encoding":""}`, 400, 0},
		{"unpadded base64", "orders", `{"payload":"AAE","payload_encoding":"base64"}`, 400, 0},
		{"url base64 alphabet", "orders", `{"payload":"_-8=","payload_encoding":"base64"}`, 400, 0},
		{"base64 of a non-string", "orders", `{"payload":5,"payload_encoding":"base64"}`, 400, 0},
		{"empty string payload", "orders", `{"payload":"a"},{"payload":"a"},{"payload":""}`, 400, 2},
		{"empty decoded base64", "orders", `{"payload":"","payload_encoding":"base64"}`, 400, 0},
		{"negative partition", "orders", `{"payload":"a","partition":-1}`, 400, 0},
		{"decoded base64 over 1 MiB", "orders", `{"payload":"a"},{"payload":` + bigB64 + `,"payload_encoding":"base64"}`, 413, 1},
		{"text over 1 MiB", "orders", `{"payload":` + bigText + `}`, 413, 0},
		{"partition out of range", "orders", `{"payload":"a"},{"payload":"a","partition":3}`, 400, 1},
		{"schema violation", "orders-schema", `{"payload":{}},{"payload":{}},{"payload":[1]}`, 400, 2},
		{"first failing record wins", "orders-schema", `{"payload":{},"partition":7},{"payload":"x"}`, 400, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.validate = schemaRejectsNonObjects
			env.be.addTopic(meta.Topic{Name: "orders"})
			env.be.addTopic(meta.Topic{Name: "orders-schema"})
			rec := env.do("POST", "/v1/topics/"+c.topic+"/produce/batch", "alice", []byte(`{"records":[`+c.records+`]}`))
			expectStatus(t, rec, c.want)
			var body struct {
				Index *int `json:"index"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Index == nil || *body.Index != c.index {
				t.Errorf("index = %v, want %d (body %.200s)", body.Index, c.index, rec.Body.String())
			}
			if env.be.called("Produce") {
				t.Error("Produce reached although a record failed")
			}
		})
	}
}

func TestBatchProduceEnvelopeErrorsHaveNoIndex(t *testing.T) {
	many := strings.Repeat(`{"payload":"a"},`, maxBatchRecords) + `{"payload":"a"}`
	cases := []struct {
		name, body string
		want       int
	}{
		{"empty records", `{"records":[]}`, 400},
		{"absent records", `{}`, 400},
		{"null records", `{"records":null}`, 400},
		{"too many records", `{"records":[` + many + `]}`, 400},
		{"malformed json", `{"records":[`, 400},
		{"unknown top-level field", `{"records":[{"payload":"a"}],"x":1}`, 400},
		{"trailing value", `{"records":[{"payload":"a"}]} 1`, 400},
		{"body over 8 MiB", `{"records":[{"payload":"` + strings.Repeat("a", maxBatchBody) + `"}]}`, 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			rec := env.do("POST", "/v1/topics/orders/produce/batch", "alice", []byte(c.body))
			expectStatus(t, rec, c.want)
			if strings.Contains(rec.Body.String(), `"index"`) {
				t.Errorf("envelope error carries an index: %.200s", rec.Body.String())
			}
		})
	}
}

func TestBatchProduceCheckOrder(t *testing.T) {
	cases := []struct {
		name, user, topic, body string
		want                    int
	}{
		{"grant before body", "bob", "orders", `{`, 403},
		{"body before existence", "alice", "orders-missing", `{"records":[]}`, 400},
		{"record syntax before existence", "alice", "orders-missing", `{"records":[{"payload":null}]}`, 400},
		{"existence before delay child", "alice", "orders-missing", `{"records":[{"payload":1}]}`, 404},
		{"delay child before partition range", "alice", "orders-d", `{"records":[{"payload":1,"partition":50}]}`, 409},
		{"exactly 4096 records accepted", "alice", "orders", `{"records":[` + strings.Repeat(`{"payload":1},`, maxBatchRecords-1) + `{"payload":1}]}`, 202},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			env.be.addTopic(meta.Topic{Name: "orders-d", Parent: "orders", FanoutDelayMs: 5, Role: meta.RoleChild})
			expectStatus(t, env.do("POST", "/v1/topics/"+c.topic+"/produce/batch", c.user, []byte(c.body)), c.want)
		})
	}
}

// Without a Content-Length the limit is still enforced by reading at most limit+1 bytes.
func TestProduceChunkedBodyOverLimitIs413(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	for _, c := range []struct {
		n    int
		want int
	}{{maxPayloadBytes + 1, 413}, {maxPayloadBytes, 202}} {
		body := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("y"), c.n)))
		req := httptest.NewRequest("POST", "/v1/topics/orders/produce", body)
		if req.ContentLength != -1 {
			t.Fatalf("test setup: ContentLength %d, want unknown", req.ContentLength)
		}
		req.SetBasicAuth("alice", "pw-alice")
		rec := httptest.NewRecorder()
		env.h.ServeHTTP(rec, req)
		expectStatus(t, rec, c.want)
	}
}
