package httpload

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrLost means a message answered with 202 was never consumed: the broker lost it.
	ErrLost = errors.New("httpload: accepted messages never consumed")
	// ErrTimeout means the run did not finish within Config.Timeout.
	ErrTimeout = errors.New("httpload: run timed out")
	// ErrNoneAccepted means not one produce was answered with 202.
	ErrNoneAccepted = errors.New("httpload: no message was accepted")
)

// run is one execution of a Config. Producers claim sequences from claimed, so exactly Count
// messages are attempted; done closes once producers have finished and every accepted
// message has been acked.
type run struct {
	cfg  Config
	tag  string
	hc   *http.Client
	book *ledger

	claimed                                  atomic.Int64
	produceReqs, produceErrs, produceRetries atomic.Int64
	consumeErrs, ackErrs, foreign            atomic.Int64
	producersDone                            atomic.Bool

	mu       sync.Mutex
	lastErr  error
	done     chan struct{}
	doneOnce sync.Once
}

// Run executes cfg and returns its result. The error wraps ErrLost when an accepted message
// was never consumed, ErrTimeout when the run did not finish, ErrNoneAccepted when nothing
// was accepted; the result is filled in every case but a configuration error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Check(); err != nil {
		return Result{}, err
	}
	r := newRun(cfg)
	defer r.hc.CloseIdleConnections()
	if cfg.Create {
		if err := r.createTopic(ctx); err != nil {
			return Result{}, err
		}
	}
	res := r.execute(ctx)
	return res, r.verdict(res)
}

func newRun(cfg Config) *run {
	conns := cfg.Workers + cfg.Consumers
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns, // every worker keeps its connection alive between requests
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &run{cfg: cfg, tag: newTag(), hc: &http.Client{Transport: tr}, book: newLedger(cfg.Count),
		done: make(chan struct{})}
}

// newTag returns a random run tag, so consumers can tell this run's messages from leftovers.
func newTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createTopic creates the topic; 409 (the name is taken) counts as success.
func (r *run) createTopic(ctx context.Context) error {
	body := fmt.Sprintf(`{"name":%q,"partitions":%d}`, r.cfg.Topic, r.cfg.Partitions)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.Server+"/v1/topics", bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if status, msg := drain(resp); status != http.StatusCreated && status != http.StatusConflict {
		return fmt.Errorf("create topic: %d %s", status, msg)
	}
	return nil
}

// execute runs producers and consumers and measures both phases.
func (r *run) execute(parent context.Context) Result {
	ctx, cancel := context.WithTimeout(parent, r.cfg.Timeout)
	defer cancel()
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	start := time.Now()
	lat := make([][]time.Duration, r.cfg.Workers)
	var pwg, cwg sync.WaitGroup
	for i := range r.cfg.Workers {
		pwg.Go(func() { r.producer(ctx, &lat[i]) })
	}
	for range r.cfg.Consumers {
		cwg.Go(func() { r.consumer(cctx) })
	}
	pwg.Wait()
	produceWall := time.Since(start)
	r.producersDone.Store(true)
	flowWall := produceWall
	if r.cfg.Consumers > 0 {
		r.checkDone()
		select {
		case <-r.done:
		case <-ctx.Done():
		}
		flowWall = time.Since(start) // the last ack; consumers parked in a long poll do not count
		ccancel()
		cwg.Wait()
	}
	return r.result(lat, produceWall, flowWall, ctx.Err() != nil && !r.finished())
}

// checkDone closes done once producers are finished and every accepted message is acked.
func (r *run) checkDone() {
	if r.producersDone.Load() && r.book.settled() {
		r.doneOnce.Do(func() { close(r.done) })
	}
}

func (r *run) finished() bool {
	attempted := r.claimed.Load() >= int64(r.cfg.Count)
	if r.cfg.Consumers == 0 {
		return attempted
	}
	select {
	case <-r.done:
		return attempted
	default:
		return false
	}
}

// noteErr keeps the last error for the report.
func (r *run) noteErr(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}

// verdict turns a result into the run's error.
func (r *run) verdict(res Result) error {
	switch {
	case res.Produced == 0:
		return fmt.Errorf("%w (%d failed requests, last error: %s)", ErrNoneAccepted, res.ProduceErrors, res.LastError)
	case res.Lost > 0:
		return fmt.Errorf("%w: %d of %d", ErrLost, res.Lost, res.Produced)
	case res.TimedOut:
		return fmt.Errorf("%w after %s: produced %d, acked %d of %d", ErrTimeout, r.cfg.Timeout, res.Produced, res.Acked, r.cfg.Count)
	}
	return nil
}
