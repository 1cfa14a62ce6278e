package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/broker/client"
)

// Endpoint is one node's API client, named by node id in a History.
type Endpoint struct {
	Node   string
	Client *client.Client
}

// TrafficStats counts the calls of a producer or consumer group. Safe for concurrent use.
type TrafficStats struct {
	calls, ok, errs, items atomic.Int64
	mu                     sync.Mutex
	errByNode              map[string]int
	lastErr                error
	total, slowest         time.Duration
}

func (s *TrafficStats) record(node string, items int, err error, took time.Duration) {
	s.calls.Add(1)
	s.mu.Lock()
	s.total += took
	s.slowest = max(s.slowest, took)
	s.mu.Unlock()
	if err == nil {
		s.ok.Add(1)
		s.items.Add(int64(items))
		return
	}
	s.errs.Add(1)
	s.mu.Lock()
	if s.errByNode == nil {
		s.errByNode = map[string]int{}
	}
	s.errByNode[node]++
	s.lastErr = fmt.Errorf("%s: %w", node, err)
	s.mu.Unlock()
}

// Calls, OK and Errors count calls; Items counts produced or delivered messages.
func (s *TrafficStats) Calls() int64  { return s.calls.Load() }
func (s *TrafficStats) OK() int64     { return s.ok.Load() }
func (s *TrafficStats) Errors() int64 { return s.errs.Load() }
func (s *TrafficStats) Items() int64  { return s.items.Load() }

// LastErr is the most recent failed call's error (nil if none failed).
func (s *TrafficStats) LastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// String summarises the counts and the failures per node.
func (s *TrafficStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := make([]string, 0, len(s.errByNode))
	for n, c := range s.errByNode {
		nodes = append(nodes, fmt.Sprintf("%s=%d", n, c))
	}
	sort.Strings(nodes)
	mean := time.Duration(0)
	if n := s.Calls(); n > 0 {
		mean = s.total / time.Duration(n)
	}
	return fmt.Sprintf("%d calls (mean %s, slowest %s), %d ok, %d failed [%s], %d messages; last error: %v",
		s.Calls(), mean.Round(time.Microsecond), s.slowest.Round(time.Millisecond), s.OK(), s.Errors(),
		strings.Join(nodes, " "), s.Items(), s.lastErr)
}

// ProducerOptions configure StartClusterProducers.
type ProducerOptions struct {
	Topic          string
	Prefix         string        // payload ids are "<Prefix>-w<worker>-<seq>"
	Workers        int           // default 2
	PerWorker      int           // messages per worker; 0 = until ctx ends
	Endpoints      []Endpoint    // message seq of worker w goes to Endpoints[(w+seq) % len]
	Partition      *int          // pin every message to this partition
	Interval       time.Duration // pause between one worker's sends; default none
	Backoff        time.Duration // pause after a failed send; default 100ms
	RequestTimeout time.Duration // per produce call; default 5s
}

// StartClusterProducers runs producers that record every attempt in h. A failed send is
// recorded and the worker moves on to a fresh payload after Backoff (no same-payload retry).
// It returns live stats and a function that blocks until every worker stopped.
func StartClusterProducers(ctx context.Context, h *History, opts ProducerOptions) (*TrafficStats, func()) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 100 * time.Millisecond
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	st := &TrafficStats{}
	var wg sync.WaitGroup
	for w := range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; opts.PerWorker == 0 || seq < opts.PerWorker; seq++ {
				if ctx.Err() != nil {
					return
				}
				ep := opts.Endpoints[(w+seq)%len(opts.Endpoints)]
				id := fmt.Sprintf("%s-w%02d-%06d", opts.Prefix, w, seq)
				began := time.Now()
				rctx, cancel := context.WithTimeout(context.Background(), opts.RequestTimeout)
				err := ep.Client.Produce(rctx, opts.Topic, []byte(id), client.ProduceOptions{Partition: opts.Partition})
				cancel()
				h.Produce(opts.Topic, ep.Node, id, err)
				st.record(ep.Node, 1, err, time.Since(began))
				pause := opts.Interval
				if err != nil {
					pause = max(pause, opts.Backoff)
				}
				if pause > 0 && !SleepCtx(ctx, pause) {
					return
				}
			}
		}()
	}
	return st, wg.Wait
}

// ConsumerOptions configure StartClusterConsumers.
type ConsumerOptions struct {
	Topic          string
	Workers        int           // default 2
	Endpoints      []Endpoint    // worker w polls Endpoints[(w+call) % len]
	Partition      *int          // pinned queue mode
	Wait           time.Duration // long-poll wait; default 1s
	Max            int           // max_messages; default 50
	Backoff        time.Duration // pause after a failed call; default 200ms
	RequestTimeout time.Duration // on top of Wait; default 5s
	NoAck          bool          // reserve without acking (deliveries come back after the visibility timeout)
}

// StartClusterConsumers runs queue consumers that record every delivery in h and ack it with
// a batch ack (ack failures are counted, the messages come back later). It returns live stats
// and a function that blocks until every worker stopped.
func StartClusterConsumers(ctx context.Context, h *History, opts ConsumerOptions) (*TrafficStats, func()) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Wait <= 0 {
		opts.Wait = time.Second
	}
	if opts.Max <= 0 {
		opts.Max = 50
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 200 * time.Millisecond
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	st := &TrafficStats{}
	var wg sync.WaitGroup
	for w := range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for call := 0; ctx.Err() == nil; call++ {
				ep := opts.Endpoints[(w+call)%len(opts.Endpoints)]
				began := time.Now()
				n, err := consumeOnce(ctx, h, ep, opts)
				st.record(ep.Node, n, err, time.Since(began))
				if err != nil && !SleepCtx(ctx, opts.Backoff) {
					return
				}
			}
		}()
	}
	return st, wg.Wait
}

// consumeOnce does one consume (and ack) call and returns the delivered count.
func consumeOnce(ctx context.Context, h *History, ep Endpoint, opts ConsumerOptions) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, opts.Wait+opts.RequestTimeout)
	defer cancel()
	msgs, err := ep.Client.Consume(rctx, opts.Topic, client.ConsumeOptions{Wait: opts.Wait, Max: opts.Max, Partition: opts.Partition})
	if err != nil {
		return 0, err
	}
	ds, err := ToDeliveries(msgs)
	h.Deliver(opts.Topic, ep.Node, ds, false)
	if err != nil || len(ds) == 0 || opts.NoAck {
		return len(ds), err
	}
	entries := make([]client.AckEntry, len(ds))
	for i, d := range ds {
		entries[i] = client.AckEntry{ReceiptHandle: d.Handle}
	}
	res, err := ep.Client.AckBatch(rctx, opts.Topic, entries)
	if err != nil {
		return len(ds), fmt.Errorf("ack: %w", err)
	}
	for _, r := range res {
		if !r.OK() {
			return len(ds), fmt.Errorf("ack entry: %d %s", r.Status, r.Error)
		}
	}
	return len(ds), nil
}

// DrainAccepted consumes topic through eps (round robin, acking) until every payload of the
// topic that h holds as accepted has been delivered and no message arrived for quiet, or ctx
// ends. It returns nil on completion, else an error naming how many are still missing.
func DrainAccepted(ctx context.Context, h *History, topic string, eps []Endpoint, quiet time.Duration) error {
	opts := ConsumerOptions{Topic: topic, Wait: 500 * time.Millisecond, Max: 200, RequestTimeout: 5 * time.Second}
	last := time.Now()
	var lastErr error
	for call := 0; ; call++ {
		if ctx.Err() != nil {
			missing := h.Missing(topic)
			return fmt.Errorf("drain of %s: %d accepted payloads still undelivered (first: %v); last consume error: %v",
				topic, len(missing), first(missing, 5), lastErr)
		}
		ep := eps[call%len(eps)]
		n, err := consumeOnce(ctx, h, ep, opts)
		if err != nil {
			lastErr = fmt.Errorf("%s: %w", ep.Node, err)
			SleepCtx(ctx, 100*time.Millisecond)
		}
		if n > 0 {
			last = time.Now()
			continue
		}
		if time.Since(last) >= quiet && len(h.Missing(topic)) == 0 {
			return nil
		}
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// SleepCtx pauses for d unless ctx ends first; it reports whether ctx is still live.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryable reports whether a metadata call's error is worth retrying: 503, 500, 429, or no
// HTTP answer at all (connection refused or reset, timeout).
func retryable(err error) bool {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Retryable()
	}
	return err != nil
}

// CreateTopicRetry creates a topic through c, retrying retryable failures every 200 ms until
// ctx ends. A 409 after an earlier ambiguous attempt counts as success (that attempt created
// the topic); a 409 on the first attempt is returned. It returns the attempts made.
func CreateTopicRetry(ctx context.Context, c *client.Client, req client.CreateTopicRequest) (int, error) {
	attempts := 0
	for {
		attempts++
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := c.CreateTopic(rctx, req)
		cancel()
		switch {
		case err == nil:
			return attempts, nil
		case attempts > 1 && client.IsStatus(err, http.StatusConflict):
			return attempts, nil
		case !retryable(err):
			return attempts, err
		}
		if !SleepCtx(ctx, 200*time.Millisecond) {
			return attempts, fmt.Errorf("create %s: gave up after %d attempts: %w", req.Name, attempts, err)
		}
	}
}

// TopicOwners describes topic through c and returns the owner node of each partition in index
// order ("" for an unassigned partition) and which partitions are unavailable.
func TopicOwners(ctx context.Context, c *client.Client, topic string) (owners []string, unavailable []int, err error) {
	d, err := c.GetTopic(ctx, topic, nil)
	if err != nil {
		return nil, nil, err
	}
	owners = make([]string, d.Partitions)
	for _, s := range d.PartitionStats {
		if s.Index < 0 || s.Index >= len(owners) {
			return nil, nil, fmt.Errorf("topic %s: partition_stats index %d outside %d partitions", topic, s.Index, d.Partitions)
		}
		owners[s.Index] = s.OwnerNode
		if !s.Available {
			unavailable = append(unavailable, s.Index)
		}
	}
	return owners, unavailable, nil
}

// WaitAssigned polls describe until every partition of topic has an owner and returns them.
func WaitAssigned(ctx context.Context, c *client.Client, topic string) ([]string, error) {
	var owners []string
	var lastErr error
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		o, _, err := TopicOwners(rctx, c, topic)
		if err != nil {
			lastErr = err
			return false, nil
		}
		owners = o
		for _, x := range o {
			if x == "" {
				return false, nil
			}
		}
		return len(o) > 0, nil
	})
	if err != nil {
		return owners, fmt.Errorf("topic %s not fully assigned (owners %v, last error %v): %w", topic, owners, lastErr, err)
	}
	return owners, nil
}

// PartitionsOwnedBy returns the partitions of owners (as from TopicOwners) owned by node.
func PartitionsOwnedBy(owners []string, node string) []int {
	var out []int
	for p, o := range owners {
		if o == node {
			out = append(out, p)
		}
	}
	return out
}
