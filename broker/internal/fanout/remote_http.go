package fanout

// The guards every remote link's HTTP client runs behind (docs/fanout.md, Remote children): no
// redirect is followed, no answer is read past MaxRemoteAnswer bytes, and a transport error is
// reported by a fixed phrase, never by its text (a TLS error quotes the target's certificate).

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// guarded returns a copy of hc (sharing its transport) that never follows a redirect (the 3xx
// answer comes back as is: redirect_refused) and reads at most MaxRemoteAnswer bytes of any
// answer body. Every remote client goes through it, also one a test supplies.
func guarded(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if _, ok := rt.(capTransport); !ok {
		c.Transport = capTransport{rt}
	}
	return &c
}

// capTransport cuts every answer body at MaxRemoteAnswer bytes (a read past it fails).
type capTransport struct{ rt http.RoundTripper }

func (t capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &capBody{rc: resp.Body, left: MaxRemoteAnswer}
	return resp, nil
}

// CloseIdleConnections passes through to the wrapped transport (Sender.Close).
func (t capTransport) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

var errAnswerTooLarge = errors.New("answer over the size limit")

type capBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *capBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *capBody) Close() error { return b.rc.Close() }

// transportReason is a fixed short reason of a transport error, whether it was a timeout (no
// answer in time) and whether the TLS handshake failed.
func transportReason(ue *url.Error) (reason string, timeout, tlsErr bool) {
	var (
		ne    net.Error
		dns   *net.DNSError
		op    *net.OpError
		cert  *tls.CertificateVerificationError
		rec   tls.RecordHeaderError
		alert tls.AlertError
		unk   x509.UnknownAuthorityError
		host  x509.HostnameError
		inv   x509.CertificateInvalidError
	)
	switch {
	case errors.As(ue.Err, &ne) && ne.Timeout():
		return "timeout", true, false
	case errors.As(ue.Err, &cert), errors.As(ue.Err, &rec), errors.As(ue.Err, &alert),
		errors.As(ue.Err, &unk), errors.As(ue.Err, &host), errors.As(ue.Err, &inv),
		strings.Contains(ue.Err.Error(), "tls: "):
		return "tls handshake failed", false, true
	case errors.Is(ue.Err, errAnswerTooLarge):
		return "answer over the size limit", false, false
	case errors.As(ue.Err, &dns):
		return "host name lookup failed", false, false
	case errors.Is(ue.Err, syscall.ECONNREFUSED):
		return "connection refused", false, false
	case errors.As(ue.Err, &op) && op.Op == "dial":
		return "connection failed", false, false
	}
	return "connection error", false, false
}
