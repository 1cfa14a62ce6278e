package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// newTLSFake serves {"status":"ok"} over HTTPS and returns the server and a pool trusting it.
func newTLSFake(t *testing.T) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestHTTPSNeedsWithTLSConfigTrustingTheServerCA(t *testing.T) {
	srv, pool := newTLSFake(t)
	trusting := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	givenTransport := NewTransport(4)
	cases := []struct {
		name   string
		opts   []Option
		wantOK bool
	}{
		{"system roots only", nil, false},
		{"trusting the CA", []Option{WithTLSConfig(trusting)}, true},
		{"trusting the CA over a given transport", []Option{WithHTTPClient(&http.Client{Transport: givenTransport}), WithTLSConfig(trusting)}, true},
		{"given client without transport", []Option{WithHTTPClient(&http.Client{}), WithTLSConfig(trusting)}, true},
		{"trusting another CA", []Option{WithTLSConfig(&tls.Config{RootCAs: x509.NewCertPool()})}, false},
		{"nil config is ignored", []Option{WithTLSConfig(nil)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(srv.URL, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Healthz(context.Background())
			if tc.wantOK {
				if err != nil || got != "ok" {
					t.Fatalf("Healthz = %q, %v", got, err)
				}
				return
			}
			var uerr x509.UnknownAuthorityError
			if !errors.As(err, &uerr) {
				t.Fatalf("Healthz = %q, %v; want an unknown-authority error", got, err)
			}
		})
	}
	if givenTransport.TLSClientConfig != nil {
		t.Fatal("New modified the transport passed with WithHTTPClient")
	}
}

func TestWithTLSConfigRefusesAForeignRoundTripper(t *testing.T) {
	rt := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("unused") })
	_, err := New("https://127.0.0.1:1", WithHTTPClient(&http.Client{Transport: rt}), WithTLSConfig(&tls.Config{}))
	if !errors.Is(err, ErrTLSTransport) {
		t.Fatalf("New = %v, want ErrTLSTransport", err)
	}
}
