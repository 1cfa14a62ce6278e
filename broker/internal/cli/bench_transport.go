package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// benchTransport is the http.RoundTripper of narad bench: HTTP/1.1 keep-alive connections
// through fasthttp, which sends a request and reads its answer on the calling goroutine. The
// standard transport hands every request to two goroutines per connection and back; on a
// machine the broker shares with its load generator, that CPU is taken from the broker being
// measured. Requests run until their context's deadline (the client sets one on every call);
// cancellation without a deadline is not seen, which a load generator can live with.
type benchTransport struct {
	maxConns int
	tls      *tls.Config

	mu    sync.Mutex
	hosts map[string]*fasthttp.HostClient // scheme://host → its connection pool
}

func newBenchTransport(maxConns int, tlsConfig *tls.Config) *benchTransport {
	return &benchTransport{maxConns: maxConns, tls: tlsConfig, hosts: map[string]*fasthttp.HostClient{}}
}

func (t *benchTransport) host(u *url.URL) (*fasthttp.HostClient, error) {
	scheme, addr := u.Scheme, u.Host
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("unsupported scheme %q", scheme)
	}
	key := scheme + "://" + addr
	t.mu.Lock()
	defer t.mu.Unlock()
	if hc, ok := t.hosts[key]; ok {
		return hc, nil
	}
	hc := &fasthttp.HostClient{
		Addr:                          addr,
		IsTLS:                         scheme == "https",
		TLSConfig:                     t.tls,
		MaxConns:                      t.maxConns,
		MaxIdleConnDuration:           90 * time.Second,
		ReadBufferSize:                64 << 10,
		WriteBufferSize:               64 << 10,
		DisableHeaderNamesNormalizing: true,
		NoDefaultUserAgentHeader:      true,
		MaxResponseBodySize:           64 << 20,
	}
	if u.Port() == "" {
		port := "80"
		if hc.IsTLS {
			port = "443"
		}
		hc.Addr = net.JoinHostPort(u.Hostname(), port)
	}
	t.hosts[key] = hc
	return hc, nil
}

// RoundTrip implements http.RoundTripper.
func (t *benchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	hc, err := t.host(req.URL)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	freq := fasthttp.AcquireRequest()
	fresp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(freq)
	defer fasthttp.ReleaseResponse(fresp)
	freq.Header.SetMethod(req.Method)
	freq.SetRequestURI(req.URL.RequestURI())
	freq.URI().SetScheme(req.URL.Scheme)
	freq.URI().SetHost(req.URL.Host)
	for k, vs := range req.Header {
		for _, v := range vs {
			freq.Header.Add(k, v)
		}
	}
	if req.Body != nil {
		_, err := io.Copy(freq.BodyWriter(), req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	dl, hasDeadline := req.Context().Deadline()
	if hasDeadline {
		err = hc.DoDeadline(freq, fresp, dl)
	} else {
		err = hc.Do(freq, fresp)
	}
	switch {
	case err == nil:
	case hasDeadline && errors.Is(err, fasthttp.ErrTimeout):
		return nil, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	case req.Context().Err() != nil:
		return nil, req.Context().Err()
	default:
		return nil, err
	}
	body := bytes.Clone(fresp.Body()) // fresp goes back to its pool
	resp := &http.Response{
		Status:        strconv.Itoa(fresp.StatusCode()) + " " + http.StatusText(fresp.StatusCode()),
		StatusCode:    fresp.StatusCode(),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, 2),
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
	for k, v := range fresp.Header.All() {
		resp.Header.Add(string(k), string(v))
	}
	return resp, nil
}
