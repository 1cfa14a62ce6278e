package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"narad.dev/broker/client"
)

// Outcome is what the caller of one produce attempt learned about it.
type Outcome int

const (
	// OutcomeAccepted is a 202: the message is durably accepted and must be delivered.
	OutcomeAccepted Outcome = iota + 1
	// OutcomeRejected is a definite refusal (a 4xx answer): the message must never be delivered.
	OutcomeRejected
	// OutcomeUnknown is an ambiguous end (5xx, timeout, broken connection, dead node): the
	// message may or may not be delivered (docs/internals/http-api.md §1.6).
	OutcomeUnknown
)

// String names the outcome for reports.
func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeRejected:
		return "rejected"
	case OutcomeUnknown:
		return "unknown"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// ClassifyProduce maps a produce call's error to its Outcome: nil → accepted; an HTTP 4xx
// answer or a refused connection (the request never reached a process) → rejected; anything
// else (5xx, timeout, reset connection) → unknown.
func ClassifyProduce(err error) Outcome {
	if err == nil {
		return OutcomeAccepted
	}
	var e *client.Error
	if errors.As(err, &e) && e.Status >= 400 && e.Status < 500 {
		return OutcomeRejected
	}
	if IsConnRefused(err) {
		return OutcomeRejected
	}
	return OutcomeUnknown
}

// ErrorKind names a failed call's error for grouping: "http <status>: <message>" for an API
// answer, else "connection refused", "timeout", or the error text after its last ": " (the
// part that does not carry a URL).
func ErrorKind(err error) string {
	var e *client.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return fmt.Sprintf("http %d: %s", e.Status, e.Message)
	case IsConnRefused(err):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	text := err.Error()
	if i := strings.LastIndex(text, ": "); i >= 0 {
		text = text[i+2:]
	}
	return text
}

// IsConnRefused reports whether err is a refused TCP connection (nothing listens: the node is
// not running).
func IsConnRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}

// ProduceRecord is one produce attempt of a unique payload id.
type ProduceRecord struct {
	ID      string // the unique payload
	Topic   string
	Node    string // node id the request was sent to
	Outcome Outcome
	Err     string // error text when not accepted
	At      time.Time
}

// DeliveryRecord is one message handed out by a consume (queue or pinned) or read by a replay.
type DeliveryRecord struct {
	ID        string // the payload
	Topic     string
	Node      string // node id that answered the consume
	Partition int
	Offset    int64
	Replay    bool // a read-only replay read: not a delivery the consumer owns
	At        time.Time
}

// History records every produce attempt and every delivery of a test run and checks them
// against the at-least-once contract. Payloads are the ids: every produce attempt must carry
// a payload no other attempt of another message uses. Safe for concurrent use.
type History struct {
	mu         sync.Mutex
	attempts   int
	produced   map[string]*idState // id → best outcome so far
	deliveries []DeliveryRecord
	errKinds   map[string]int // "<node> <error kind>" → failed produce calls
	errSpan    map[string][2]time.Time
}

type idState struct {
	topic    string
	outcome  Outcome
	attempts int
	at       time.Time // first acceptance (or first attempt when never accepted)
	node     string    // node of the first acceptance (or first attempt)
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{produced: map[string]*idState{}} }

// RecordProduce adds one attempt. An id attempted more than once (a client retry of the same
// payload) keeps its best outcome: accepted beats unknown beats rejected.
func (h *History) RecordProduce(r ProduceRecord) {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	if r.Outcome != OutcomeAccepted {
		if h.errKinds == nil {
			h.errKinds, h.errSpan = map[string]int{}, map[string][2]time.Time{}
		}
		k := r.Node + " " + r.Err
		h.errKinds[k]++
		span, ok := h.errSpan[k]
		if !ok {
			span[0] = r.At
		}
		span[1] = r.At
		h.errSpan[k] = span
	}
	s := h.produced[r.ID]
	if s == nil {
		h.produced[r.ID] = &idState{topic: r.Topic, outcome: r.Outcome, attempts: 1, at: r.At, node: r.Node}
		return
	}
	s.attempts++
	if rank(r.Outcome) > rank(s.outcome) {
		if r.Outcome == OutcomeAccepted {
			s.at, s.node = r.At, r.Node
		}
		s.outcome = r.Outcome
	}
}

func rank(o Outcome) int {
	switch o {
	case OutcomeAccepted:
		return 3
	case OutcomeUnknown:
		return 2
	case OutcomeRejected:
		return 1
	}
	return 0
}

// Produce records an attempt of id on topic sent to node, classifying err.
func (h *History) Produce(topic, node, id string, err error) Outcome {
	o := ClassifyProduce(err)
	r := ProduceRecord{ID: id, Topic: topic, Node: node, Outcome: o}
	if err != nil {
		r.Err = ErrorKind(err)
	}
	h.RecordProduce(r)
	return o
}

// RecordDelivery adds one delivery.
func (h *History) RecordDelivery(d DeliveryRecord) {
	if d.At.IsZero() {
		d.At = time.Now()
	}
	h.mu.Lock()
	h.deliveries = append(h.deliveries, d)
	h.mu.Unlock()
}

// Deliver records consumed messages of topic answered by node (replay marks read-only reads).
func (h *History) Deliver(topic, node string, ds []Delivery, replay bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range ds {
		at := d.At
		if at.IsZero() {
			at = time.Now()
		}
		h.deliveries = append(h.deliveries, DeliveryRecord{ID: d.Payload, Topic: topic, Node: node,
			Partition: d.Partition, Offset: d.Offset, Replay: replay, At: at})
	}
}

// AcceptedAt returns when id's first 202 arrived and whether it has one.
func (h *History) AcceptedAt(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.produced[id]
	if s == nil || s.outcome != OutcomeAccepted {
		return time.Time{}, false
	}
	return s.at, true
}

// Accepted returns the ids of topic ("" = every topic) that got a 202.
func (h *History) Accepted(topic string) map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for id, s := range h.produced {
		if s.outcome == OutcomeAccepted && (topic == "" || s.topic == topic) {
			out[id] = true
		}
	}
	return out
}

// Deliveries returns a copy of every recorded delivery, in recording order.
func (h *History) Deliveries() []DeliveryRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]DeliveryRecord(nil), h.deliveries...)
}

// Missing returns the sorted ids of topic ("" = every topic) that got a 202 and have no
// delivery yet.
func (h *History) Missing(topic string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(h.deliveries))
	for _, d := range h.deliveries {
		seen[d.ID] = true
	}
	var out []string
	for id, s := range h.produced {
		if s.outcome == OutcomeAccepted && (topic == "" || s.topic == topic) && !seen[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
