package httpload

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// dropQueue is a fake node: it answers every produce with 202 and queues the message, except
// the sequence it drops, which it accepts and never delivers.
type dropQueue struct {
	drop int64
	mu   sync.Mutex
	q    [][]byte
	wake chan struct{}
}

func (d *dropQueue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/topics/t/produce":
		body, _ := io.ReadAll(r.Body)
		if seq, err := parsePayload(r.Header.Get("X-Test-Run"), body); err != nil || seq != d.drop {
			d.push(body)
		}
		w.WriteHeader(http.StatusAccepted)
	case r.URL.Path == "/v1/topics/t/consume":
		d.consume(w, r)
	case r.URL.Path == "/v1/topics/t/ack":
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (d *dropQueue) push(body []byte) {
	d.mu.Lock()
	d.q = append(d.q, body)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dropQueue) consume(w http.ResponseWriter, r *http.Request) {
	deadline := time.After(100 * time.Millisecond)
	for {
		d.mu.Lock()
		if len(d.q) > 0 {
			m := d.q[0]
			d.q = d.q[1:]
			d.mu.Unlock()
			_, _ = w.Write([]byte(`{"payload":` + string(m) + `,"receipt_handle":"0:1:1"}`))
			return
		}
		d.mu.Unlock()
		select {
		case <-d.wake:
		case <-deadline:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func TestRunFailsWhenAnAcceptedMessageIsNeverDelivered(t *testing.T) {
	const dropped = 7
	fake := &dropQueue{drop: dropped, wake: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.51:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(fake)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	cfg := Config{Server: srv.URL, Topic: "t", Count: 50, Size: 100, Workers: 4, Consumers: 4,
		Wait: 100 * time.Millisecond, Timeout: 2 * time.Second}
	r := newRun(cfg)
	// The fake cannot read the random tag from the payload alone: hand it over in a header.
	r.hc.Transport = tagHeader{r.tag, r.hc.Transport}
	res := r.execute(context.Background())
	err = r.verdict(res)
	if !errors.Is(err, ErrLost) {
		t.Fatalf("verdict = %v, want ErrLost (result %+v)", err, res)
	}
	if res.Produced != 50 || res.Lost != 1 || res.Acked != 49 || !res.TimedOut {
		t.Fatalf("result = %+v, want 50 produced, 49 acked, 1 lost, timed out", res)
	}
}

// tagHeader adds the run tag to every request as X-Test-Run.
type tagHeader struct {
	tag  string
	next http.RoundTripper
}

func (h tagHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Run", h.tag)
	return h.next.RoundTrip(r)
}

func TestConfigCheckRefusesEachBadField(t *testing.T) {
	good := Config{Server: "http://127.0.0.51:1", Topic: "t", Count: 1, Size: MinSize, Workers: 1,
		Wait: time.Second, Timeout: time.Second}
	if err := good.Check(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"server":    func(c *Config) { c.Server = "127.0.0.51:1" },
		"topic":     func(c *Config) { c.Topic = "" },
		"count":     func(c *Config) { c.Count = 0 },
		"size":      func(c *Config) { c.Size = MinSize - 1 },
		"workers":   func(c *Config) { c.Workers = 0 },
		"consumers": func(c *Config) { c.Consumers = -1 },
		"wait":      func(c *Config) { c.Wait = 0 },
	} {
		c := good
		mut(&c)
		if err := c.Check(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Check() = %v, want ErrConfig", name, err)
		}
	}
}
