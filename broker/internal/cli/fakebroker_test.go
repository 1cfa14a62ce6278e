package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeBroker is an in-memory single-topic queue speaking the produce/consume/ack subset of
// the API (single and batch forms), enough to drive `narad bench` end to end.
type fakeBroker struct {
	srv *httptest.Server

	mu       sync.Mutex
	ready    [][]byte          // messages not reserved, FIFO
	inflight map[string][]byte // handle → message
	nonce    int64
	next     int64
	notify   chan struct{} // closed and replaced on every produce
	produces int           // produce requests (single or batch)
}

func newFakeBroker(t *testing.T) *fakeBroker {
	t.Helper()
	b := &fakeBroker{inflight: map[string][]byte{}, notify: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics/{t}/produce", b.produce)
	mux.HandleFunc("POST /v1/topics/{t}/produce/batch", b.produceBatch)
	mux.HandleFunc("GET /v1/topics/{t}/consume", b.consume)
	mux.HandleFunc("POST /v1/topics/{t}/ack", b.ack)
	mux.HandleFunc("POST /v1/topics/{t}/ack/batch", b.ackBatch)
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	return b
}

func (b *fakeBroker) add(msgs ...[]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.produces++
	b.ready = append(b.ready, msgs...)
	close(b.notify)
	b.notify = make(chan struct{})
}

func (b *fakeBroker) produce(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if len(body) == 0 {
		reply(w, 400, `{"error":"empty body"}`)
		return
	}
	b.add(body)
	w.WriteHeader(http.StatusAccepted)
}

func (b *fakeBroker) produceBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Records []struct {
			Payload         json.RawMessage `json:"payload"`
			PayloadEncoding string          `json:"payload_encoding"`
		} `json:"records"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Records) == 0 {
		reply(w, 400, `{"error":"invalid json"}`)
		return
	}
	msgs := make([][]byte, 0, len(req.Records))
	for _, rec := range req.Records {
		var s string
		if json.Unmarshal(rec.Payload, &s) == nil {
			if rec.PayloadEncoding == "base64" {
				d, _ := base64.StdEncoding.DecodeString(s)
				msgs = append(msgs, d)
			} else {
				msgs = append(msgs, []byte(s))
			}
		} else {
			msgs = append(msgs, rec.Payload)
		}
	}
	b.add(msgs...)
	reply(w, http.StatusAccepted, fmt.Sprintf(`{"accepted":%d}`, len(msgs)))
}

// take reserves up to n messages, waiting up to wait for the first.
func (b *fakeBroker) take(r *http.Request, n int, wait time.Duration) (handles []string, msgs [][]byte) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		if len(b.ready) > 0 {
			for len(b.ready) > 0 && len(msgs) < n {
				m := b.ready[0]
				b.ready = b.ready[1:]
				b.nonce++
				h := fmt.Sprintf("0:%d:%d", b.next, b.nonce)
				b.next++
				b.inflight[h] = m
				handles, msgs = append(handles, h), append(msgs, m)
			}
			b.mu.Unlock()
			return handles, msgs
		}
		ch := b.notify
		b.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return nil, nil
		case <-r.Context().Done():
			return nil, nil
		}
	}
}

func wireMessage(h string, m []byte) map[string]any {
	p := strings.Split(h, ":")
	off, _ := strconv.ParseInt(p[1], 10, 64)
	out := map[string]any{"topic": "bench", "partition": 0, "offset": off, "timestamp": 1700000000, "receipt_handle": h}
	switch {
	case json.Valid(m):
		out["payload"] = json.RawMessage(m)
	case utf8.Valid(m):
		out["payload"] = string(m)
	default:
		out["payload"], out["payload_encoding"] = base64.StdEncoding.EncodeToString(m), "base64"
	}
	return out
}

func (b *fakeBroker) consume(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	wait, _ := time.ParseDuration(q.Get("wait"))
	n := 1
	if q.Has("max_messages") {
		n, _ = strconv.Atoi(q.Get("max_messages"))
	}
	handles, msgs := b.take(r, n, wait)
	if len(msgs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var out []map[string]any
	for i := range msgs {
		out = append(out, wireMessage(handles[i], msgs[i]))
	}
	w.Header().Set("Content-Type", "application/json")
	if q.Has("max_messages") {
		_ = json.NewEncoder(w).Encode(map[string]any{"messages": out})
	} else {
		_ = json.NewEncoder(w).Encode(out[0])
	}
}

func (b *fakeBroker) settle(h string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.inflight[h]; !ok {
		return http.StatusGone
	}
	delete(b.inflight, h)
	return http.StatusNoContent
}

func (b *fakeBroker) ack(w http.ResponseWriter, r *http.Request) {
	if st := b.settle(r.URL.Query().Get("receipt_handle")); st != http.StatusNoContent {
		reply(w, st, `{"error":"no live reservation"}`)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *fakeBroker) ackBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Acks []struct {
			ReceiptHandle string `json:"receipt_handle"`
		} `json:"acks"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		reply(w, 400, `{"error":"invalid json"}`)
		return
	}
	res := make([]map[string]any, len(req.Acks))
	for i, a := range req.Acks {
		res[i] = map[string]any{"status": b.settle(a.ReceiptHandle)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"results": res})
}

func (b *fakeBroker) stats() (produces, ready, inflight int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.produces, len(b.ready), len(b.inflight)
}
