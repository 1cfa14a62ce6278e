package httpload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// message is the part of a consumed Message object the run reads (docs/consuming.md).
type message struct {
	Payload       json.RawMessage `json:"payload"`
	ReceiptHandle string          `json:"receipt_handle"`
}

// consumer long-polls the topic and acks every message it receives, until ctx ends. Messages
// of another run (leftovers of an earlier one on the same topic) are acked and counted apart,
// as `narad bench` does: given back, they would come first again and starve this run.
func (r *run) consumer(ctx context.Context) {
	base := r.cfg.Server + "/v1/topics/" + r.cfg.Topic
	consumeURL := base + "/consume?wait=" + r.cfg.Wait.String()
	for ctx.Err() == nil {
		m, ok, err := r.consumeOne(ctx, consumeURL)
		if err != nil {
			if ctx.Err() == nil {
				r.consumeErrs.Add(1)
				r.noteErr(err)
			}
			continue
		}
		if !ok {
			continue
		}
		seq, err := parsePayload(r.tag, m.Payload)
		if errors.Is(err, errForeign) {
			r.foreign.Add(1)
			_ = r.settle(ctx, base, m.ReceiptHandle)
			continue
		}
		if err := r.book.consume(seq); err != nil {
			r.noteErr(err)
			continue
		}
		if err := r.settle(ctx, base, m.ReceiptHandle); err != nil {
			if ctx.Err() == nil {
				r.ackErrs.Add(1)
				r.noteErr(err)
			}
			continue
		}
		r.book.ack(seq)
		r.checkDone()
	}
}

// consumeOne makes one long poll; ok is false when the wait passed with nothing (204).
func (r *run) consumeOne(ctx context.Context, u string) (message, bool, error) {
	var m message
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return m, false, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return m, false, fmt.Errorf("consume: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		status, msg := drain(resp)
		if status == http.StatusNoContent {
			return m, false, nil
		}
		return m, false, fmt.Errorf("consume: %d %s", status, msg)
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&m)
	_, _ = io.Copy(io.Discard, resp.Body)
	if err != nil {
		return m, false, fmt.Errorf("consume: decoding the message: %w", err)
	}
	return m, true, nil
}

// settle acks one lease, retrying on 503 (the partition's acked-ahead window is full) until
// 204; 410 (the lease ended: the message comes again) and other statuses are errors.
func (r *run) settle(ctx context.Context, base, handle string) error {
	u := base + "/ack?receipt_handle=" + url.QueryEscape(handle)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
		if err != nil {
			return err
		}
		resp, err := r.hc.Do(req)
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		status, msg := drain(resp)
		switch status {
		case http.StatusNoContent:
			return nil
		case http.StatusServiceUnavailable:
			if err := pause(ctx, retryPause); err != nil {
				return err
			}
		default:
			return fmt.Errorf("ack: %d %s", status, msg)
		}
	}
}
