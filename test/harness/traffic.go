package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"narad.dev/broker/client"
)

// Produced records which unique payloads a set of producers got a 202 for. Accepted is the
// ground truth of a durability test: every payload in it must be delivered at least once.
// Safe for concurrent use.
type Produced struct {
	mu       sync.Mutex
	accepted map[string]time.Time // payload → when its 202 arrived
	attempts int
	failures int
	firstErr error
}

// NewProduced returns an empty record.
func NewProduced() *Produced { return &Produced{accepted: map[string]time.Time{}} }

func (p *Produced) record(payload string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if err == nil {
		p.accepted[payload] = time.Now()
		return
	}
	p.failures++
	if p.firstErr == nil {
		p.firstErr = err
	}
}

// Accepted returns a copy of the set of payloads answered 202.
func (p *Produced) Accepted() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]bool, len(p.accepted))
	for k := range p.accepted {
		out[k] = true
	}
	return out
}

// Counts returns (attempted, accepted, failed) produce calls.
func (p *Produced) Counts() (attempts, accepted, failures int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts, len(p.accepted), p.failures
}

// FirstErr is the first failed produce's error (nil if none failed).
func (p *Produced) FirstErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstErr
}

// ProduceConcurrently runs workers producers against topic, each sending unique payloads
// "<prefix>-w<worker>-<seq>" one at a time until ctx is done, maxPerWorker messages were
// sent (0 = no bound besides ctx), or its first failed call (a crashed node fails every
// call; a worker stops rather than spin). It blocks until every worker has stopped.
func ProduceConcurrently(ctx context.Context, c *client.Client, topic, prefix string, workers, maxPerWorker int) *Produced {
	p, wait := StartProducers(ctx, c, topic, prefix, workers, maxPerWorker)
	wait()
	return p
}

// StartProducers is ProduceConcurrently without the wait: it returns the live record at once
// and a function that blocks until every worker has stopped.
func StartProducers(ctx context.Context, c *client.Client, topic, prefix string, workers, maxPerWorker int) (*Produced, func()) {
	p := NewProduced()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for seq := 0; maxPerWorker == 0 || seq < maxPerWorker; seq++ {
				if ctx.Err() != nil {
					return
				}
				payload := fmt.Sprintf("%s-w%02d-%06d", prefix, w, seq)
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := c.Produce(rctx, topic, []byte(payload), client.ProduceOptions{})
				cancel()
				p.record(payload, err)
				if err != nil {
					return
				}
			}
		}(w)
	}
	return p, wg.Wait
}

// ProduceBatches sends n unique payloads "<prefix>-<seq>" in batches of batchSize and returns
// them in order. It stops at the first error.
func ProduceBatches(ctx context.Context, c *client.Client, topic, prefix string, n, batchSize int) ([]string, error) {
	out := make([]string, 0, n)
	for start := 0; start < n; start += batchSize {
		end := min(start+batchSize, n)
		recs := make([]client.BatchRecord, 0, end-start)
		for i := start; i < end; i++ {
			payload := fmt.Sprintf("%s-%06d", prefix, i)
			recs = append(recs, client.NewBatchRecord("", []byte(payload)))
			out = append(out, payload)
		}
		got, err := c.ProduceBatch(ctx, topic, recs)
		if err != nil {
			return out[:start], err
		}
		if got != len(recs) {
			return out[:start], fmt.Errorf("batch accepted %d of %d", got, len(recs))
		}
	}
	return out, nil
}

// Delivery is one message handed out by a queue consume (or read by a replay).
type Delivery struct {
	Payload   string
	Key       string
	Partition int
	Offset    int64
	Handle    string
	At        time.Time // when the consume response arrived
}

// Pos identifies a record in a topic.
type Pos struct {
	Partition int
	Offset    int64
}

// Pos returns the record position of the delivery.
func (d Delivery) Pos() Pos { return Pos{d.Partition, d.Offset} }

// ToDeliveries converts consumed messages (payload decoded by the §2.10 rule).
func ToDeliveries(msgs []client.Message) ([]Delivery, error) {
	now := time.Now()
	out := make([]Delivery, 0, len(msgs))
	for _, m := range msgs {
		b, err := m.Bytes()
		if err != nil {
			return out, fmt.Errorf("message p%d@%d: %w", m.Partition, m.Offset, err)
		}
		out = append(out, Delivery{Payload: string(b), Key: m.Key, Partition: m.Partition, Offset: m.Offset,
			Handle: m.ReceiptHandle, At: now})
	}
	return out, nil
}

// DrainOptions bound a Drain.
type DrainOptions struct {
	Batch    int                       // max_messages per consume; default 100
	PollWait time.Duration             // long-poll wait per consume; default 500ms
	Quiet    time.Duration             // stop after this long without a message; default 2s
	Limit    time.Duration             // hard bound on the whole drain; default 30s
	Done     func(got []Delivery) bool // optional: keep draining (up to Limit) until it holds, then honour Quiet
	NoAck    bool                      // reserve without acking
}

// Drain consumes topic in queue mode and acks everything it receives, until the topic has
// been quiet for opts.Quiet (and opts.Done, if set, holds) or opts.Limit passes. It returns
// every delivery in arrival order. Acks answered 503 are retried (bounded by Limit); any other
// ack outcome than 204 is an error.
func Drain(ctx context.Context, c *client.Client, topic string, opts DrainOptions) ([]Delivery, error) {
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	if opts.PollWait <= 0 {
		opts.PollWait = 500 * time.Millisecond
	}
	if opts.Quiet <= 0 {
		opts.Quiet = 2 * time.Second
	}
	if opts.Limit <= 0 {
		opts.Limit = 30 * time.Second
	}
	deadline := time.Now().Add(opts.Limit)
	var got []Delivery
	last := time.Now()
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return got, err
		}
		msgs, err := c.Consume(ctx, topic, client.ConsumeOptions{Wait: opts.PollWait, Max: opts.Batch})
		if err != nil {
			return got, fmt.Errorf("drain consume: %w", err)
		}
		if len(msgs) == 0 {
			satisfied := opts.Done == nil || opts.Done(got)
			if satisfied && time.Since(last) >= opts.Quiet {
				return got, nil
			}
			continue
		}
		last = time.Now()
		ds, err := ToDeliveries(msgs)
		if err != nil {
			return got, err
		}
		got = append(got, ds...)
		if opts.NoAck {
			continue
		}
		if err := AckAll(ctx, c, topic, ds, deadline); err != nil {
			return got, err
		}
	}
	if opts.Done != nil && !opts.Done(got) {
		return got, fmt.Errorf("drain of %s: condition not met within %s (%d deliveries)", topic, opts.Limit, len(got))
	}
	return got, nil
}

// ErrAckRejected is returned by AckAll when an entry got a final status other than 204.
var ErrAckRejected = errors.New("ack rejected")

// AckAll acks every delivery with ack/batch, retrying entries answered 503 until deadline.
func AckAll(ctx context.Context, c *client.Client, topic string, ds []Delivery, deadline time.Time) error {
	pending := make([]client.AckEntry, 0, len(ds))
	for _, d := range ds {
		pending = append(pending, client.AckEntry{ReceiptHandle: d.Handle})
	}
	for len(pending) > 0 {
		res, err := c.AckBatch(ctx, topic, pending)
		if err != nil {
			return fmt.Errorf("ack batch: %w", err)
		}
		var retry []client.AckEntry
		for i, r := range res {
			switch r.Status {
			case http.StatusNoContent:
			case http.StatusServiceUnavailable:
				retry = append(retry, pending[i])
			default:
				return fmt.Errorf("%w: handle %s: %d %s", ErrAckRejected, pending[i].ReceiptHandle, r.Status, r.Error)
			}
		}
		if len(retry) > 0 && time.Now().After(deadline) {
			return fmt.Errorf("%w: %d acks still 503 at the deadline", ErrAckRejected, len(retry))
		}
		pending = retry
	}
	return nil
}

// PayloadCounts counts deliveries per payload.
func PayloadCounts(ds []Delivery) map[string]int {
	out := make(map[string]int, len(ds))
	for _, d := range ds {
		out[d.Payload]++
	}
	return out
}

// Missing returns the members of want (sorted) that have no delivery in got.
func Missing(want map[string]bool, got map[string]int) []string {
	var out []string
	for p := range want {
		if got[p] == 0 {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Duplicates returns how many deliveries repeated a payload already delivered.
func Duplicates(got map[string]int) int {
	n := 0
	for _, c := range got {
		if c > 1 {
			n += c - 1
		}
	}
	return n
}

// HighWatermarks returns the per-partition high watermarks of a topic, index-ordered.
func HighWatermarks(ctx context.Context, c *client.Client, topic string) ([]int64, error) {
	d, err := c.GetTopic(ctx, topic, nil)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(d.PartitionStats))
	for i, s := range d.PartitionStats {
		if !s.Available {
			return nil, fmt.Errorf("partition %d not available", s.Index)
		}
		out[i] = s.HighWatermark
	}
	return out, nil
}

// Sum adds up int64s.
func Sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}
