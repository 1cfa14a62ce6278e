package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// ErrEmptyBatch is returned by ProduceBatch for an empty record list (the server would answer
// 400).
var ErrEmptyBatch = errors.New("batch has no records")

// ProduceOptions are the optional query parameters of a produce (§2.7).
type ProduceOptions struct {
	Key       string // "" = keyless
	Partition *int   // pins the partition, overriding the key
}

// Produce sends one message (POST /v1/topics/{topic}/produce). A nil error means 202: the
// message is durably accepted. Never retry a success; a timeout or 5xx is ambiguous and a
// retry may duplicate (§1.6).
func (c *Client) Produce(ctx context.Context, topic string, body []byte, opts ProduceOptions) error {
	q := url.Values{}
	if opts.Key != "" {
		q.Set("key", opts.Key)
	}
	if opts.Partition != nil {
		q.Set("partition", strconv.Itoa(*opts.Partition))
	}
	if body == nil {
		body = []byte{}
	}
	_, err := c.do(ctx, request{
		method: http.MethodPost, path: "/v1/topics/" + seg(topic) + "/produce", query: q,
		body: body, contentType: "application/octet-stream",
	})
	return err
}

// batchResponse is the 202 body of a batch produce.
type batchResponse struct {
	Accepted int `json:"accepted"`
}

// ProduceBatch sends records in one all-or-nothing durable accept
// (POST /v1/topics/{topic}/produce/batch) and returns the accepted count. A record at fault
// is named by the returned *Error's Index.
func (c *Client) ProduceBatch(ctx context.Context, topic string, records []BatchRecord) (int, error) {
	if len(records) == 0 {
		return 0, ErrEmptyBatch
	}
	body, err := encodeBatchRequest(records)
	if err != nil {
		return 0, fmt.Errorf("POST produce/batch: encoding request: %w", err)
	}
	var resp batchResponse
	if _, err := c.doEncoded(ctx, http.MethodPost, "/v1/topics/"+seg(topic)+"/produce/batch", body, &resp); err != nil {
		return 0, err
	}
	return resp.Accepted, nil
}
