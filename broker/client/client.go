package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	json "github.com/goccy/go-json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds one request (connect to last body byte) unless WithTimeout says
// otherwise. A consume's long-poll wait is added on top of it.
const DefaultTimeout = 30 * time.Second

// ErrBadBaseURL is returned by New for a base URL that is not an absolute http(s) URL.
var ErrBadBaseURL = errors.New("base URL must be an absolute http:// or https:// URL")

// ErrTLSTransport is returned by New when WithTLSConfig is combined with WithHTTPClient whose
// Transport is not an *http.Transport (the TLS settings have nowhere to go).
var ErrTLSTransport = errors.New("WithTLSConfig needs an *http.Transport in WithHTTPClient")

// Client talks to one Narad endpoint (normally a load balancer in front of every node).
// Its configuration never changes after New, so it is safe for concurrent use.
type Client struct {
	base    string // scheme://host[/prefix], no trailing slash
	hc      *http.Client
	tls     *tls.Config // WithTLSConfig; applied to the transport in New
	user    string
	pass    string
	useAuth bool
	timeout time.Duration // per request; <= 0 = none
	agent   string
}

// Option configures a Client in New.
type Option func(*Client)

// WithBasicAuth sends HTTP Basic credentials with every request (docs/internals/http-api.md §1.2).
func WithBasicAuth(user, pass string) Option {
	return func(c *Client) { c.user, c.pass, c.useAuth = user, pass, true }
}

// WithHTTPClient makes the Client send its requests through hc (its Transport, redirect
// policy and Timeout are used as they are). A nil hc is ignored.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithTLSConfig makes https:// requests use cfg (for example RootCAs trusting the cluster's
// CA, or a client certificate). New never modifies cfg nor a transport passed with
// WithHTTPClient: it uses a clone of that *http.Transport. A nil cfg is ignored.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) {
		if cfg != nil {
			c.tls = cfg
		}
	}
}

// WithTimeout bounds each request to d (0 or negative: no bound besides the caller's
// context). Consume adds its long-poll wait to d so a long poll is never cut short.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.agent = ua }
}

// New returns a Client for baseURL (for example "http://127.0.0.1:7942"). The URL must be an
// absolute http or https URL; a path prefix is kept and the /v1 routes are appended to it.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBaseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q", ErrBadBaseURL, baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	c := &Client{base: u.String(), timeout: DefaultTimeout, agent: "narad-go-client"}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: NewTransport(64)}
	}
	if c.tls != nil {
		hc, err := withTLS(c.hc, c.tls)
		if err != nil {
			return nil, err
		}
		c.hc = hc
	}
	return c, nil
}

// withTLS returns a copy of hc whose transport (a clone; NewTransport(64) when hc has none)
// uses cfg for TLS.
func withTLS(hc *http.Client, cfg *tls.Config) (*http.Client, error) {
	var t *http.Transport
	switch rt := hc.Transport.(type) {
	case nil:
		t = NewTransport(64)
	case *http.Transport:
		t = rt.Clone()
	default:
		return nil, fmt.Errorf("%w (got %T)", ErrTLSTransport, rt)
	}
	t.TLSClientConfig = cfg.Clone()
	cp := *hc
	cp.Transport = t
	return &cp, nil
}

// NewTransport returns an http.Transport tuned for many concurrent requests to one host:
// keep-alive pools of maxIdlePerHost connections, no response compression, HTTP/1.1.
func NewTransport(maxIdlePerHost int) *http.Transport {
	if maxIdlePerHost < 2 {
		maxIdlePerHost = 2
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		MaxIdleConns:          maxIdlePerHost * 2,
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
}

// BaseURL returns the base URL the Client was built with (without a trailing slash).
func (c *Client) BaseURL() string { return c.base }

// request describes one API call.
type request struct {
	method      string
	path        string     // already escaped, starting with "/"
	query       url.Values // may be nil
	body        []byte     // nil = no body
	contentType string
	accept      string        // "" = application/json
	extra       time.Duration // added to the per-request timeout (long polls)
}

// response is a completed exchange with a 2xx status.
type response struct {
	status int
	body   []byte
}

// do performs r. A non-2xx status is returned as *Error; transport failures are wrapped with
// the method and path.
func (c *Client) do(ctx context.Context, r request) (response, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+r.extra)
		defer cancel()
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if r.body != nil && r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if c.agent != "" {
		req.Header.Set("User-Agent", c.agent)
	}
	if c.useAuth {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return response{}, decodeError(resp.StatusCode, b)
	}
	b, err := readBody(resp)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading response: %w", r.method, r.path, err)
	}
	return response{status: resp.StatusCode, body: b}, nil
}

// maxPresized bounds the buffer readBody allocates up front from a Content-Length.
const maxPresized = 64 << 20

// readBody reads a response body into one buffer of its Content-Length when the server sent
// one (a batch consume answer is about 100 KiB: growing from 512 bytes re-copied it a dozen
// times), and with io.ReadAll otherwise.
func readBody(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > maxPresized {
		return io.ReadAll(resp.Body)
	}
	b := make([]byte, n, n+1) // the spare byte lets the EOF check below read without growing
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, err
	}
	// Drain to EOF so the connection goes back to the pool (and catch a body longer than said).
	if k, err := resp.Body.Read(b[n : n+1]); k > 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = fmt.Errorf("response body longer than its Content-Length %d", n)
		}
		return nil, err
	}
	return b, nil
}

// doJSON sends in (if non-nil) as a JSON body and decodes a 2xx body into out (if non-nil
// and the body is not empty).
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	r := request{method: method, path: path, query: query}
	if in != nil {
		b, err := marshalJSON(in)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encoding request: %w", method, path, err)
		}
		r.body, r.contentType = b, "application/json"
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return 0, err
	}
	if out != nil && len(bytes.TrimSpace(resp.body)) > 0 {
		if err := unmarshal(resp.body, out); err != nil {
			return resp.status, fmt.Errorf("%s %s: decoding response: %w", method, path, err)
		}
	}
	return resp.status, nil
}

// doEncoded is doJSON with a request body that is already encoded JSON.
func (c *Client) doEncoded(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	resp, err := c.do(ctx, request{method: method, path: path, body: body, contentType: "application/json"})
	if err != nil {
		return 0, err
	}
	if out != nil && len(bytes.TrimSpace(resp.body)) > 0 {
		if err := unmarshal(resp.body, out); err != nil {
			return resp.status, fmt.Errorf("%s %s: decoding response: %w", method, path, err)
		}
	}
	return resp.status, nil
}

// marshalJSON encodes v without HTML escaping, so payload text is sent as written.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
