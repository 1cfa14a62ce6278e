package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"narad.dev/broker/client"
	"narad.dev/broker/internal/clock"
)

// benchRun is one bench execution. Producers claim message ranges from claimed, so exactly
// cfg.Count messages are attempted; consumers count only messages carrying the run's tag.
// The full flow is done when producers have finished and acked ≥ produced.
type benchRun struct {
	cfg  benchConfig
	cs   []*client.Client // one per server; workers use clientFor
	body []byte
	tag  []byte // nil: every consumed message is the run's

	claimed       atomic.Int64 // messages handed to producers
	produced      atomic.Int64 // messages accepted (202)
	produceReqs   atomic.Int64 // produce requests that completed (any outcome but cancellation)
	produceErrs   atomic.Int64 // failed produce requests
	failedMsgs    atomic.Int64 // messages in failed produce requests
	consumed      atomic.Int64 // run messages received (redeliveries included)
	acked         atomic.Int64 // run messages acked with 204
	consumeErrs   atomic.Int64
	ackErrs       atomic.Int64 // acks that ended without 204 (410, given-up retries)
	producersDone atomic.Bool

	lat [][]time.Duration // per producer: latency of each accepted request

	mu      sync.Mutex
	lastErr error
	fatal   error
	cancel  context.CancelFunc // cancels the whole run (fatal error)

	done     chan struct{}
	doneOnce sync.Once

	limit *rate.Limiter // --rate; nil: unlimited
	pin   *int          // --partition; nil: the server picks
}

// newBenchRun prepares a run; producers and consumers are spread round-robin over cs (one
// client per server with --servers, so the load reaches every node of a cluster).
func newBenchRun(cfg benchConfig, cs ...*client.Client) *benchRun {
	body, tag := benchPayload(cfg.Size)
	r := &benchRun{cfg: cfg, cs: cs, body: body, tag: tag, lat: make([][]time.Duration, cfg.Workers),
		done: make(chan struct{})}
	if cfg.Rate > 0 {
		r.limit = rate.NewLimiter(rate.Limit(cfg.Rate), max(1, cfg.Batch))
	}
	if cfg.Partition >= 0 {
		p := cfg.Partition
		r.pin = &p
	}
	return r
}

// clientFor returns the client worker i uses.
func (r *benchRun) clientFor(i int) *client.Client { return r.cs[i%len(r.cs)] }

// run executes the benchmark until every message is produced (and with Consume, acked), the
// timeout passes, a non-retryable error occurs, or ctx ends.
func (r *benchRun) run(parent context.Context) (benchResult, error) {
	ctx, cancel := context.WithTimeout(parent, r.cfg.Timeout)
	defer cancel()
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	r.mu.Lock()
	r.cancel = rcancel
	r.mu.Unlock()
	cctx, ccancel := context.WithCancel(rctx)
	defer ccancel()

	start := time.Now()
	var pwg, cwg sync.WaitGroup
	for i := 0; i < r.cfg.Workers; i++ {
		pwg.Add(1)
		go func() { defer pwg.Done(); r.producer(rctx, i) }()
	}
	if r.cfg.Consume {
		for i := 0; i < r.cfg.Consumers; i++ {
			cwg.Add(1)
			go func() { defer cwg.Done(); r.consumer(cctx, r.clientFor(i)) }()
		}
	}
	pwg.Wait()
	produceEnd := time.Now()
	r.producersDone.Store(true)
	r.checkDone()
	end := produceEnd
	if r.cfg.Consume {
		select {
		case <-r.done:
		case <-rctx.Done():
		}
		end = time.Now() // the last ack: consumers still parked in a long poll do not count
		ccancel()
		cwg.Wait()
	}

	res := r.result(produceEnd.Sub(start), end.Sub(start))
	r.mu.Lock()
	fatal, last := r.fatal, r.lastErr
	r.mu.Unlock()
	if last != nil {
		res.LastError = last.Error()
	}
	attempted := r.produced.Load()+r.failedMsgs.Load() >= int64(r.cfg.Count)
	finished := attempted && (!r.cfg.Consume || isClosed(r.done))
	switch {
	case fatal != nil:
		return res, fatal
	case parent.Err() != nil:
		return res, errf("bench interrupted: produced %d, acked %d of %d", res.Produced, res.Acked, r.cfg.Count)
	case !finished && ctx.Err() != nil:
		res.TimedOut = true
		return res, errf("bench timed out after %s: produced %d, acked %d of %d", r.cfg.Timeout, res.Produced, res.Acked, r.cfg.Count)
	case res.Produced == 0:
		return res, errf("no message was accepted (%d failed requests; last error: %s)", res.ProduceErrors, res.LastError)
	}
	return res, nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fail records the first non-retryable error and stops the run.
func (r *benchRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal == nil {
		r.fatal = err
		r.cancel()
	}
}

func (r *benchRun) noteErr(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}

// checkDone closes done once producers have finished and every accepted message was acked.
func (r *benchRun) checkDone() {
	if r.producersDone.Load() && r.acked.Load() >= r.produced.Load() {
		r.doneOnce.Do(func() { close(r.done) })
	}
}

// producer sends claimed ranges until cfg.Count messages were attempted.
func (r *benchRun) producer(ctx context.Context, id int) {
	c := r.clientFor(id)
	chunk := max(1, r.cfg.Batch)
	var recs []client.BatchRecord
	if r.cfg.Batch > 0 {
		rec := client.NewBatchRecord("", r.body)
		rec.Partition = r.pin
		recs = make([]client.BatchRecord, chunk)
		for i := range recs {
			recs[i] = rec
		}
	}
	for ctx.Err() == nil {
		first := r.claimed.Add(int64(chunk)) - int64(chunk)
		if first >= int64(r.cfg.Count) {
			return
		}
		n := min(int64(chunk), int64(r.cfg.Count)-first)
		if r.limit != nil && r.limit.WaitN(ctx, int(n)) != nil {
			return // cancelled
		}
		t0 := time.Now()
		var err error
		if r.cfg.Batch > 0 {
			_, err = c.ProduceBatch(ctx, r.cfg.Topic, recs[:n])
		} else {
			err = c.Produce(ctx, r.cfg.Topic, r.body, client.ProduceOptions{Partition: r.pin})
		}
		d := time.Since(t0)
		if err != nil && ctx.Err() != nil {
			return // cancelled, not a server outcome
		}
		r.produceReqs.Add(1)
		if err != nil {
			r.produceErrs.Add(1)
			r.failedMsgs.Add(n)
			r.noteErr(err)
			if fatalAPIError(err) {
				r.fail(fmt.Errorf("produce: %w", err))
				return
			}
			continue
		}
		r.lat[id] = append(r.lat[id], d)
		r.produced.Add(n)
	}
}

// consumer receives, counts and acks until ctx ends.
func (r *benchRun) consumer(ctx context.Context, c *client.Client) {
	opts := client.ConsumeOptions{Wait: benchConsumeWait, Max: min(r.cfg.Batch, client.MaxConsumeMessages)}
	failures := 0
	for ctx.Err() == nil {
		msgs, err := c.Consume(ctx, r.cfg.Topic, opts)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.consumeErrs.Add(1)
			r.noteErr(err)
			if fatalAPIError(err) {
				r.fail(fmt.Errorf("consume: %w", err))
				return
			}
			failures++
			_ = clock.Sleep(ctx, time.Duration(min(failures, 10))*20*time.Millisecond)
			continue
		}
		failures = 0
		if len(msgs) == 0 {
			continue
		}
		own := make([]bool, len(msgs))
		for i, m := range msgs {
			own[i] = r.isOwn(m)
			if own[i] {
				r.consumed.Add(1)
			}
		}
		if r.cfg.Batch > 0 {
			r.ackBatch(ctx, c, msgs, own)
		} else {
			for i, m := range msgs {
				r.ackOne(ctx, c, m, own[i])
			}
		}
		r.checkDone()
	}
}

func (r *benchRun) isOwn(m client.Message) bool {
	if r.tag == nil {
		return true
	}
	// Fast path: the tag is plain ASCII with nothing JSON escapes, so a text payload's JSON
	// string form starts with a quote and the tag itself; no need to decode the whole payload.
	if m.PayloadEncoding == "" && len(m.Payload) > len(r.tag) && m.Payload[0] == '"' {
		return bytes.HasPrefix(m.Payload[1:], r.tag)
	}
	b, err := m.Bytes()
	return err == nil && bytes.HasPrefix(b, r.tag)
}

// benchAckTries bounds ack attempts per message, as `narad sub` does.
const benchAckTries = ackTries

func (r *benchRun) ackOne(ctx context.Context, c *client.Client, m client.Message, own bool) {
	failures := 0
	for attempt := 0; ; attempt++ {
		if attempt > 0 && clock.Sleep(ctx, ackRetryPause(attempt)) != nil {
			return
		}
		err := c.Ack(ctx, r.cfg.Topic, m.ReceiptHandle)
		switch {
		case err == nil:
			if own {
				r.acked.Add(1)
			}
			return
		case ctx.Err() != nil:
			return
		case client.IsStatus(err, http.StatusGone) || !retryableErr(err):
			r.ackErrs.Add(1)
			r.noteErr(err)
			if fatalAPIError(err) && !client.IsStatus(err, http.StatusGone) {
				r.fail(fmt.Errorf("ack: %w", err))
			}
			return
		case client.IsStatus(err, http.StatusServiceUnavailable):
			continue // acked-ahead window full: retry until 204 or 410
		}
		if failures++; failures >= benchAckTries {
			r.ackErrs.Add(1)
			r.noteErr(err)
			return
		}
	}
}

// ackBatch acks msgs with ack/batch. Entries that got 503 (the partition's acked-ahead window
// is full) are retried until 204 or 410, as the API asks of clients: the window drains as soon
// as the frontier hole is acked, usually within milliseconds, so the first retries come fast.
// The lease's expiry (410) bounds the loop. Transport errors are retried benchAckTries times.
func (r *benchRun) ackBatch(ctx context.Context, c *client.Client, msgs []client.Message, own []bool) {
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	failures := 0
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 && clock.Sleep(ctx, ackRetryPause(attempt)) != nil {
			return
		}
		entries := make([]client.AckEntry, len(pending))
		for j, i := range pending {
			entries[j] = client.AckEntry{ReceiptHandle: msgs[i].ReceiptHandle}
		}
		res, err := c.AckBatch(ctx, r.cfg.Topic, entries)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.noteErr(err)
			failures++
			if !retryableErr(err) || failures >= benchAckTries {
				r.ackErrs.Add(int64(len(pending)))
				if fatalAPIError(err) {
					r.fail(fmt.Errorf("ack batch: %w", err))
				}
				return
			}
			continue
		}
		retry := pending[:0:0]
		for j, i := range pending {
			switch res[j].Status {
			case http.StatusNoContent:
				if own[i] {
					r.acked.Add(1)
				}
			case http.StatusServiceUnavailable:
				retry = append(retry, i)
			default:
				r.ackErrs.Add(1)
			}
		}
		pending = retry
	}
}

// ackRetryPause is the pause before retry attempt n (≥ 1) of a 503 ack: 2 ms doubling to 100 ms.
func ackRetryPause(n int) time.Duration {
	d := 2 * time.Millisecond << min(n-1, 6)
	return min(d, 100*time.Millisecond)
}
