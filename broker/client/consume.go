package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxConsumeMessages is the largest max_messages the server accepts (§6.1).
const MaxConsumeMessages = 1000

// ErrOffsetWithoutPartition is returned by Consume when Offset is set without Partition
// (the server would answer 400).
var ErrOffsetWithoutPartition = errors.New("consume offset requires a partition")

// ConsumeOptions select the consume mode (§2.9, §6.1): queue (neither Partition nor Offset),
// pinned queue (Partition only) or replay (Partition and Offset; read-only, no handles).
type ConsumeOptions struct {
	Wait      time.Duration // long-poll budget; the server clamps it (default ceiling 10 s)
	Partition *int
	Offset    *int64
	Max       int // > 1 sends max_messages=Max (§6.1); <= 1 asks for one message
}

// Consume receives messages (GET /v1/topics/{topic}/consume). It returns nil, nil when
// nothing arrived within Wait (204) or a replay offset is not yet written. With Max <= 1 the
// response is the single Message object of §2.9; with Max > 1 it is {"messages": [...]}
// (either shape is accepted in both cases).
func (c *Client) Consume(ctx context.Context, topic string, opts ConsumeOptions) ([]Message, error) {
	if opts.Offset != nil && opts.Partition == nil {
		return nil, ErrOffsetWithoutPartition
	}
	q := url.Values{}
	if opts.Wait > 0 {
		q.Set("wait", opts.Wait.String())
	}
	if opts.Partition != nil {
		q.Set("partition", strconv.Itoa(*opts.Partition))
	}
	if opts.Offset != nil {
		q.Set("offset", strconv.FormatInt(*opts.Offset, 10))
	}
	if opts.Max > 1 {
		q.Set("max_messages", strconv.Itoa(opts.Max))
	}
	path := "/v1/topics/" + seg(topic) + "/consume"
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, extra: opts.Wait})
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNoContent || len(bytes.TrimSpace(resp.body)) == 0 {
		return nil, nil
	}
	msgs, err := decodeConsume(resp.body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: decoding response: %w", path, err)
	}
	return msgs, nil
}

// consumeBody decodes both consume shapes in one pass: Messages is non-nil only for the
// {"messages": [...]} form; otherwise the embedded Message holds the single object.
type consumeBody struct {
	Message
	Messages *[]Message `json:"messages"`
}

// decodeConsume decodes a consume body: {"messages": [...]} or one Message object. An empty
// messages list yields nil.
func decodeConsume(body []byte) ([]Message, error) {
	if msgs, ok := decodeConsumeFast(body); ok {
		return msgs, nil
	}
	return decodeConsumeGeneric(body)
}

// decodeConsumeGeneric is decodeConsume with the reflection-based decoder only.
func decodeConsumeGeneric(body []byte) ([]Message, error) {
	var b consumeBody
	if err := unmarshal(body, &b); err != nil {
		return nil, err
	}
	if b.Messages != nil {
		if len(*b.Messages) == 0 {
			return nil, nil
		}
		return *b.Messages, nil
	}
	return []Message{b.Message}, nil
}

// Ack settles a reserved message (POST /v1/topics/{topic}/ack, 204). A 410 *Error means the
// lease lapsed or was already settled: stop work and expect a duplicate; never retry it.
// Retry a 503 with back-off.
func (c *Client) Ack(ctx context.Context, topic, handle string) error {
	return c.ackOne(ctx, topic, handle, "")
}

// Extend restarts the lease of a reserved message with a fresh visibility window; the handle
// stays valid.
func (c *Client) Extend(ctx context.Context, topic, handle string) error {
	return c.ackOne(ctx, topic, handle, "true")
}

// Nack releases a reserved message for immediate redelivery; the handle is dead afterwards.
func (c *Client) Nack(ctx context.Context, topic, handle string) error {
	return c.ackOne(ctx, topic, handle, "0")
}

func (c *Client) ackOne(ctx context.Context, topic, handle, extend string) error {
	q := url.Values{"receipt_handle": {handle}}
	if extend != "" {
		q.Set("extend", extend)
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/topics/" + seg(topic) + "/ack", query: q})
	return err
}

// Extend values of an AckEntry (§2.11).
const (
	AckSettle = ""     // ack
	AckExtend = "true" // extend the lease
	AckNack   = "0"    // nack
)

// AckEntry is one entry of a batch ack (§6.2): Extend is AckSettle, AckExtend or AckNack.
type AckEntry struct {
	ReceiptHandle string `json:"receipt_handle"`
	Extend        string `json:"extend,omitempty"`
}

// AckResult is the outcome of one batch-ack entry: Status 204, 400, 410 or 503.
type AckResult struct {
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// OK reports whether the entry took effect (204).
func (r AckResult) OK() bool { return r.Status == http.StatusNoContent }

type ackBatchRequest struct {
	Acks []AckEntry `json:"acks"`
}

type ackBatchResponse struct {
	Results []AckResult `json:"results"`
}

// AckBatch applies each entry independently (POST /v1/topics/{topic}/ack/batch) and returns
// one result per entry, in request order. Retry the entries that got 503 as a single 503 ack
// would be retried. An answer with a different number of results is an error.
func (c *Client) AckBatch(ctx context.Context, topic string, entries []AckEntry) ([]AckResult, error) {
	if len(entries) == 0 {
		return []AckResult{}, nil
	}
	var resp ackBatchResponse
	path := "/v1/topics/" + seg(topic) + "/ack/batch"
	if _, err := c.doJSON(ctx, http.MethodPost, path, nil, ackBatchRequest{Acks: entries}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(entries) {
		return nil, fmt.Errorf("POST %s: %d results for %d entries", path, len(resp.Results), len(entries))
	}
	return resp.Results, nil
}
