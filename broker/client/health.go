package client

import (
	"context"
	"net/http"
)

// Healthz checks liveness (GET /healthz) and returns the status text ("ok"). A shutting-down
// node answers 503, returned as *Error.
func (c *Client) Healthz(ctx context.Context) (string, error) {
	return c.health(ctx, "/healthz")
}

// Readyz checks readiness (GET /readyz) and returns the status text ("ready"). A node that
// may not receive traffic answers 503 with the reason, returned as *Error.
func (c *Client) Readyz(ctx context.Context) (string, error) {
	return c.health(ctx, "/readyz")
}

func (c *Client) health(ctx context.Context, path string) (string, error) {
	var b healthBody
	if _, err := c.doJSON(ctx, http.MethodGet, path, nil, nil, &b); err != nil {
		return "", err
	}
	return b.Status, nil
}

// Metrics returns the Prometheus text exposition of GET /metrics.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/metrics", accept: "text/plain"})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}
