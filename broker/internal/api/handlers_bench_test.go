package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// leanBackend answers the hot calls without the fake backend's call log, so the benchmarks
// below count the HTTP layer's allocations only.
type leanBackend struct {
	*fakeBackend
	topic meta.Topic
	msg   []service.Message
}

func (b *leanBackend) Topic(string) (meta.Topic, bool) { return b.topic, true }
func (b *leanBackend) Produce(context.Context, meta.Topic, []service.ProduceRecord) error {
	return nil
}
func (b *leanBackend) Consume(context.Context, meta.Topic, service.ConsumeRequest) ([]service.Message, error) {
	return b.msg, nil
}
func (b *leanBackend) Ack(_ context.Context, _ meta.Topic, entries []service.AckEntry) []error {
	return make([]error, len(entries))
}

// discardWriter is a ResponseWriter that keeps only its header map and the last status.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkHotHandlers runs the three requests of the single-message full flow (docs/benchmarks.md)
// through the whole handler (auth off, routing, observation), one 1 KiB message: a change
// that allocates per request shows in allocs/op.
func BenchmarkHotHandlers(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1024)
	h := consume.Handle{Partition: 1, Offset: 7, Nonce: 9}
	be := &leanBackend{
		fakeBackend: newFakeBackend(),
		topic:       meta.Topic{Name: "t", Partitions: 3},
		msg: []service.Message{{Topic: "t", Partition: 1, Offset: 7, Payload: payload,
			CommittedAtMs: 1, ReceiptHandle: h.String()}},
	}
	srv := NewHandler(Options{Backend: be, Observer: nopObserver{}})
	for _, c := range []struct {
		name, method, target string
		body                 []byte
	}{
		{"produce", "POST", "/v1/topics/t/produce", payload},
		{"consume", "GET", "/v1/topics/t/consume?wait=1s", nil},
		{"ack", "POST", "/v1/topics/t/ack?receipt_handle=" + h.String(), nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := &discardWriter{h: http.Header{}}
			body := bytes.NewReader(c.body)
			r, err := http.NewRequest(c.method, "http://narad"+c.target, body)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				body.Reset(c.body)
				r.Body = io.NopCloser(body)
				clear(w.h)
				srv.ServeHTTP(w, r)
			}
			if w.status < 200 || w.status > 299 {
				b.Fatalf("%s %s: status %d", c.method, c.target, w.status)
			}
		})
	}
}

// nopObserver is an HTTPObserver that drops everything.
type nopObserver struct{}

func (nopObserver) ObserveRequest(string, string, int, time.Duration, int64, int64) {}
func (nopObserver) InFlight(int)                                                    {}
