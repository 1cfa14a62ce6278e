package httpload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// retryPause is how long a producer or an acker waits after a 503 before trying again: the
// API asks for a retry with back-off (docs/producing.md, docs/consuming.md).
const retryPause = 5 * time.Millisecond

// producer claims sequences until the run's count is reached and POSTs each as one message.
// It records the latency of every accepted request in lat.
func (r *run) producer(ctx context.Context, lat *[]time.Duration) {
	url := r.cfg.Server + "/v1/topics/" + r.cfg.Topic + "/produce"
	for ctx.Err() == nil {
		seq := r.claimed.Add(1) - 1
		if seq >= int64(r.cfg.Count) {
			return
		}
		body := payload(r.tag, seq, r.cfg.Size)
		t0 := time.Now()
		if err := r.produceOne(ctx, url, body); err != nil {
			r.produceErrs.Add(1)
			r.noteErr(err)
			continue
		}
		*lat = append(*lat, time.Since(t0))
		r.book.accept(seq)
	}
}

// produceOne sends one message, retrying on 503 until 202, another status, or ctx's end.
func (r *run) produceOne(ctx context.Context, url string, body []byte) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := r.hc.Do(req)
		r.produceReqs.Add(1)
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		status, msg := drain(resp)
		switch {
		case status == http.StatusAccepted:
			return nil
		case status == http.StatusServiceUnavailable:
			r.produceRetries.Add(1)
			if err := pause(ctx, retryPause); err != nil {
				return err
			}
		default:
			return fmt.Errorf("produce: %d %s", status, msg)
		}
	}
}

// drain reads and closes a response body so its connection goes back to the idle pool; it
// returns the status and the first bytes of the body for error messages.
func drain(resp *http.Response) (int, string) {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, string(b[:min(len(b), 200)])
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
