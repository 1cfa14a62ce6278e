package disk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Payloads are "<id>|" followed by filler derived from the id, so a delivery proves both which
// produce it came from and that its bytes survived intact.

// makePayload returns the body of message id, size bytes long (at least the id and the bar).
func makePayload(id string, size int) []byte {
	b := make([]byte, 0, max(size, len(id)+1))
	b = append(b, id...)
	b = append(b, '|')
	for i := 0; len(b) < size; i++ {
		b = append(b, 'a'+byte((len(id)+i)%26))
	}
	return b
}

// PayloadID returns the id of a payload made by makePayload, and false if the payload is not
// exactly what makePayload gives for that id and length.
func PayloadID(p string) (string, bool) {
	id, _, ok := strings.Cut(p, "|")
	if !ok || !bytes.Equal([]byte(p), makePayload(id, len(p))) {
		return "", false
	}
	return id, true
}

// Outcome records what a produce load was answered. The ground truth of a disk test is
// Accepted: every id in it got a 202 and must be delivered. Safe for concurrent use.
type Outcome struct {
	mu          sync.Mutex
	accepted    map[string]bool
	attempts    int
	unavailable int      // 503s
	firstError  string   // the first 503's "error" field
	badBodies   []string // 503s whose body is not a JSON object with a non-empty "error"
	other       []string // any other status, or a transport error / timeout (first few)
	otherCount  int
}

// NewOutcome returns an empty record.
func NewOutcome() *Outcome { return &Outcome{accepted: map[string]bool{}} }

// OutcomeSnapshot is a consistent copy of an Outcome's counters.
type OutcomeSnapshot struct {
	Attempts, Accepted, Unavailable, OtherCount int
	FirstError                                  string
	BadBodies, Other                            []string
}

func (s OutcomeSnapshot) String() string {
	return fmt.Sprintf("%d produce calls: %d answered 202, %d answered 503 (first: %q), %d other outcomes %v",
		s.Attempts, s.Accepted, s.Unavailable, s.FirstError, s.OtherCount, s.Other)
}

// Snapshot returns the current counters.
func (o *Outcome) Snapshot() OutcomeSnapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	return OutcomeSnapshot{
		Attempts: o.attempts, Accepted: len(o.accepted), Unavailable: o.unavailable, OtherCount: o.otherCount,
		FirstError: o.firstError, BadBodies: append([]string(nil), o.badBodies...), Other: append([]string(nil), o.other...),
	}
}

// Accepted returns a copy of the ids answered 202.
func (o *Outcome) Accepted() map[string]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]bool, len(o.accepted))
	for k := range o.accepted {
		out[k] = true
	}
	return out
}

// record files one produce outcome: status 0 means a transport error (err set).
func (o *Outcome) record(id string, status int, body []byte, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts++
	switch {
	case err == nil && status == http.StatusAccepted:
		o.accepted[id] = true
	case err == nil && status == http.StatusServiceUnavailable:
		o.unavailable++
		var eb struct {
			Error *string `json:"error"`
		}
		if jerr := json.Unmarshal(body, &eb); jerr != nil || eb.Error == nil || *eb.Error == "" {
			if len(o.badBodies) < 5 {
				o.badBodies = append(o.badBodies, fmt.Sprintf("%q", truncate(body, 200)))
			}
		} else if o.firstError == "" {
			o.firstError = *eb.Error
		}
	default:
		o.otherCount++
		if len(o.other) < 5 {
			if err != nil {
				o.other = append(o.other, fmt.Sprintf("%s: %v", id, err))
			} else {
				o.other = append(o.other, fmt.Sprintf("%s: %d %q", id, status, truncate(body, 200)))
			}
		}
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// Producer sends unique payloads "<prefix>-<seq>|…" of a fixed size with plain HTTP, so every
// answer's status and raw body are seen.
type Producer struct {
	url    string
	prefix string
	size   int
	seq    atomic.Int64
	hc     *http.Client
}

// NewProducer returns a producer for topic on the node at baseURL.
func NewProducer(baseURL, topic, prefix string, size int) *Producer {
	return &Producer{
		url: baseURL + "/v1/topics/" + topic + "/produce", prefix: prefix, size: size,
		hc: &http.Client{Transport: client.NewTransport(8), Timeout: 10 * time.Second},
	}
}

// Close releases the producer's idle connections.
func (p *Producer) Close() { p.hc.CloseIdleConnections() }

// Once sends one new payload, files the outcome in out and returns the status (0 for a
// transport error).
func (p *Producer) Once(out *Outcome) int {
	id := fmt.Sprintf("%s-%06d", p.prefix, p.seq.Add(1))
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(makePayload(id, p.size)))
	if err != nil {
		out.record(id, 0, nil, err)
		return 0
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := p.hc.Do(req)
	if err != nil {
		out.record(id, 0, nil, err)
		return 0
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	out.record(id, resp.StatusCode, body, err)
	return resp.StatusCode
}

// Load is a running set of producer workers.
type Load struct {
	Out    *Outcome
	cancel context.CancelFunc
	done   chan struct{}
}

// StartLoad runs workers goroutines that each send payloads one at a time until Stop, or
// until maxAttempts produce calls were made in all. Workers do not stop on errors: a 503 is
// what the disk tests wait for.
func StartLoad(p *Producer, out *Outcome, workers, maxAttempts int) *Load {
	c, cancel := context.WithCancel(context.Background())
	l := &Load{Out: out, cancel: cancel, done: make(chan struct{})}
	var budget atomic.Int64
	budget.Store(int64(maxAttempts))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.Err() == nil && budget.Add(-1) >= 0 {
				p.Once(out)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

// Finished reports whether every worker has stopped (budget spent or Stop called).
func (l *Load) Finished() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Stop ends the load and waits for in-flight calls to finish (each is bounded by the
// producer's 10 s timeout).
func (l *Load) Stop() {
	l.cancel()
	<-l.done
}

// errorLines returns up to max warn/error lines of the node's log.
func errorLines(n *harness.Node, max int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return ""
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, "panic") {
			out = append(out, l)
		}
	}
	if len(out) > max {
		out = append(out[:max/2], append([]string{"…"}, out[len(out)-max/2:]...)...)
	}
	return strings.Join(out, "\n")
}
