package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Spec §2.11: consume grant (403) → query and handle syntax (400) → existence (404) →
// handle partition range (400) → reservation match (410) → acked-ahead window (503).
func TestAckCheckOrder(t *testing.T) {
	cases := []struct {
		name, user, path string
		backend          error
		want             int
	}{
		{"grant before handle syntax", "bob", "/v1/topics/orders-missing/ack", nil, 403},
		{"missing handle before existence", "alice", "/v1/topics/orders-missing/ack", nil, 400},
		{"empty handle", "alice", "/v1/topics/orders-missing/ack?receipt_handle=", nil, 400},
		{"malformed handle before existence", "alice", "/v1/topics/orders-missing/ack?receipt_handle=1:2", nil, 400},
		{"zero nonce is malformed", "alice", "/v1/topics/orders-missing/ack?receipt_handle=0:0:0", nil, 400},
		{"bad extend before existence", "alice", "/v1/topics/orders-missing/ack?receipt_handle=0:1:1&extend=yes", nil, 400},
		{"existence before partition range", "alice", "/v1/topics/orders-missing/ack?receipt_handle=99:1:1", nil, 404},
		{"partition range before reservation", "alice", "/v1/topics/orders/ack?receipt_handle=3:1:1", ErrStale, 400},
		{"stale lease is 410", "alice", "/v1/topics/orders/ack?receipt_handle=2:1:1", ErrStale, 410},
		{"acked-ahead full is 503", "alice", "/v1/topics/orders/ack?receipt_handle=2:1:1", ErrAckedAheadFull, 503},
		{"owner unreachable is 503", "alice", "/v1/topics/orders/ack?receipt_handle=2:1:1&extend=true", ErrUnavailable, 503},
		{"ack done", "alice", "/v1/topics/orders/ack?receipt_handle=2:1:1", nil, 204},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			env.be.ackFn = func(es []service.AckEntry) []error { return []error{c.backend} }
			rec := env.do("POST", c.path, c.user, []byte("ignored body"))
			expectStatus(t, rec, c.want)
			if c.want != 204 && c.want != 410 && c.want != 503 && env.be.called("Ack") {
				t.Error("Ack reached on a refused request")
			}
		})
	}
}

func TestAckExtendValuesAndFirstValueWins(t *testing.T) {
	cases := []struct {
		query string
		op    service.AckOp
		ok    bool
	}{
		{"", service.OpAck, true},
		{"&extend=", service.OpAck, true},
		{"&extend=false", service.OpAck, true},
		{"&extend=true", service.OpExtend, true},
		{"&extend=1", service.OpExtend, true},
		{"&extend=0", service.OpNack, true},
		{"&extend=TRUE", 0, false},
		{"&extend=2", 0, false},
		{"&extend=0&extend=garbage", service.OpNack, true},
		{"&extend=garbage&extend=0", 0, false},
		{"&receipt_handle=bad", service.OpAck, true}, // the first handle (below) wins
	}
	for _, c := range cases {
		env := newEnv(t)
		env.be.addTopic(meta.Topic{Name: "orders"})
		rec := env.do("POST", "/v1/topics/orders/ack?receipt_handle=1:5:9"+c.query, "alice", nil)
		if !c.ok {
			expectStatus(t, rec, 400)
			continue
		}
		expectStatus(t, rec, 204)
		want := service.AckEntry{Partition: 1, Offset: 5, Nonce: 9, Op: c.op}
		if got := env.be.acked[0][0]; got != want {
			t.Errorf("%q: entry %+v, want %+v", c.query, got, want)
		}
	}
}

func TestAckBatchPerEntryResults(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	env.be.ackFn = func(es []service.AckEntry) []error {
		out := make([]error, len(es))
		for i, e := range es {
			switch e.Offset {
			case 10:
				out[i] = fmt.Errorf("lease: %w", ErrStale)
			case 11:
				out[i] = ErrAckedAheadFull
			case 12:
				out[i] = ErrUnavailable
			}
		}
		return out
	}
	body := `{"acks":[
		{"receipt_handle":"0:1:1"},
		{"receipt_handle":"0:10:1","extend":"true"},
		{"receipt_handle":"junk"},
		{"receipt_handle":"1:11:1","extend":"0"},
		{"receipt_handle":"7:1:1"},
		{"receipt_handle":"2:12:1"},
		{"receipt_handle":"2:13:1","extend":"maybe"},
		{"receipt_handle":""}
	]}`
	rec := env.do("POST", "/v1/topics/orders/ack/batch", "alice", []byte(body))
	expectStatus(t, rec, 200)
	var got struct {
		Results []ackResult `json:"results"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []int{204, 410, 400, 503, 400, 503, 400, 400}
	if len(got.Results) != len(want) {
		t.Fatalf("%d results, want %d: %s", len(got.Results), len(want), rec.Body.String())
	}
	for i, w := range want {
		r := got.Results[i]
		if r.Status != w || (w == 204) != (r.Error == "") {
			t.Errorf("result %d = %+v, want status %d", i, r, w)
		}
	}
	sent := env.be.acked[0]
	if len(sent) != 4 || sent[1].Op != service.OpExtend || sent[2].Op != service.OpNack || sent[0].Op != service.OpAck {
		t.Errorf("backend got %+v", sent)
	}
}

func TestAckBatchCallLevelErrors(t *testing.T) {
	many := strings.Repeat(`{"receipt_handle":"0:1:1"},`, maxAckBatch) + `{"receipt_handle":"0:1:1"}`
	cases := []struct {
		name, user, topic, body string
		want                    int
	}{
		{"grant before body", "bob", "orders", `{`, 403},
		{"malformed body", "alice", "orders", `{"acks":[`, 400},
		{"unknown field", "alice", "orders", `{"acks":[{"receipt_handle":"0:1:1","nack":true}]}`, 400},
		{"extend must be a string", "alice", "orders", `{"acks":[{"receipt_handle":"0:1:1","extend":true}]}`, 400},
		{"empty acks", "alice", "orders", `{"acks":[]}`, 400},
		{"too many acks", "alice", "orders", `{"acks":[` + many + `]}`, 400},
		{"body before existence", "alice", "orders-missing", `{}`, 400},
		{"unknown topic", "alice", "orders-missing", `{"acks":[{"receipt_handle":"0:1:1"}]}`, 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			env.be.addTopic(meta.Topic{Name: "orders"})
			expectStatus(t, env.do("POST", "/v1/topics/"+c.topic+"/ack/batch", c.user, []byte(c.body)), c.want)
			if env.be.called("Ack") {
				t.Error("Ack reached")
			}
		})
	}
}
