package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"narad.dev/broker/internal/meta"
)

// The budget never hands out more than its limit, whatever the interleaving, and every
// reservation comes back.
func TestRequestBudgetNeverExceedsItsLimit(t *testing.T) {
	const limit, each, workers, rounds = 10, 3, 8, 200
	b := newRequestBudget(limit)
	var held, peak atomic.Int64
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !b.tryReserve(each) {
					continue
				}
				granted.Add(1)
				now := held.Add(each)
				for {
					p := peak.Load()
					if now <= p || peak.CompareAndSwap(p, now) {
						break
					}
				}
				held.Add(-each)
				b.release(each)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Fatalf("peak reserved %d bytes, over the %d limit", p, limit)
	}
	if granted.Load() == 0 {
		t.Fatal("no reservation was ever granted")
	}
	if u := b.inUse(); u != 0 {
		t.Fatalf("%d bytes still reserved after every release", u)
	}
	if b.tryReserve(limit + 1) {
		t.Fatal("a reservation over the whole limit was granted")
	}
	if !b.tryReserve(limit) {
		t.Fatal("a reservation of exactly the limit was refused on an idle budget")
	}
}

// While produces hold most of the budget, one that does not fit is answered 503 with
// Retry-After and a JSON error before its body is read; once they finish, the budget is
// whole again and the same produce is accepted.
func TestProduceOverBudgetIs503WithRetryAfterWhileOthersInFlight(t *testing.T) {
	const budget = 5 << 19 // 2.5 MiB: two 1 MiB bodies in flight leave less than one more
	env := newEnv(t, func(o *Options) { o.MaxInflightRequestBytes = budget })
	env.be.addTopic(meta.Topic{Name: "orders"})
	entered := make(chan struct{})
	unblock := make(chan struct{})
	env.be.produceGate = func() { entered <- struct{}{}; <-unblock }

	payload := bytes.Repeat([]byte("p"), maxPayloadBytes) // 1 MiB single produce
	batch := []byte(fmt.Sprintf(`{"records":[{"payload":"%s"}]}`, bytes.Repeat([]byte("b"), maxPayloadBytes-64)))
	var wg sync.WaitGroup
	results := make([]int, 2)
	for i, req := range []struct {
		path string
		body []byte
	}{
		{"/v1/topics/orders/produce", payload},
		{"/v1/topics/orders/produce/batch", batch},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = env.do("POST", req.path, "alice", req.body).Code
		}()
		<-entered // both requests now hold their bodies inside Produce
	}
	if used := env.h.(*server).budget.inUse(); used < 2<<20-64 {
		t.Fatalf("in-flight produces hold %d budget bytes, want about 2 MiB", used)
	}

	counted := &countingReader{r: bytes.NewReader(payload)}
	req := httptest.NewRequest("POST", "/v1/topics/orders/produce/batch", counted)
	req.ContentLength = int64(len(batch)) + 1<<20 // declares more than what is left
	req.SetBasicAuth("alice", "pw-alice")
	rec := httptest.NewRecorder()
	env.h.ServeHTTP(rec, req)
	expectStatus(t, rec, 503)
	if ra := rec.Header().Get("Retry-After"); ra == "" {
		t.Fatal("503 without Retry-After")
	}
	if counted.n.Load() != 0 {
		t.Fatalf("the refused request's body was read (%d bytes)", counted.n.Load())
	}

	chunked := httptest.NewRequest("POST", "/v1/topics/orders/produce", io.MultiReader(bytes.NewReader(payload)))
	chunked.SetBasicAuth("alice", "pw-alice")
	rec = httptest.NewRecorder()
	env.h.ServeHTTP(rec, chunked)
	expectStatus(t, rec, 503) // a body without length grows past what is left and is refused too

	close(unblock)
	wg.Wait()
	for i, code := range results {
		if code != 202 {
			t.Fatalf("in-flight produce %d answered %d, want 202", i, code)
		}
	}
	if used := env.h.(*server).budget.inUse(); used != 0 {
		t.Fatalf("%d budget bytes still held after every request ended", used)
	}
	env.be.produceGate = nil
	expectStatus(t, env.do("POST", "/v1/topics/orders/produce", "alice", payload), 202)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
