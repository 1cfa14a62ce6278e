package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/client"
)

// The bench transport carries method, path, query, headers and body to the server and the
// status, headers and body back, over plain HTTP and TLS.
func TestBenchTransportRoundTrip(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, pass, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Seen", r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type")+" "+user+":"+pass)
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(append([]byte("echo:"), b...))
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewTLSServer(h)
	defer secure.Close()
	for name, srv := range map[string]*httptest.Server{"http": plain, "https": secure} {
		t.Run(name, func(t *testing.T) {
			var cfg *tls.Config
			if srv == secure {
				cfg = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
			}
			hc := &http.Client{Transport: newBenchTransport(4, cfg)}
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/topics/t/produce?partition=2", strings.NewReader("hello"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/octet-stream")
			req.SetBasicAuth("u", "p")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusAccepted || string(b) != "echo:hello" || resp.ContentLength != int64(len(b)) {
				t.Fatalf("answer %d %q (length %d), want 202 \"echo:hello\"", resp.StatusCode, b, resp.ContentLength)
			}
			if got, want := resp.Header.Get("X-Seen"), "POST /v1/topics/t/produce?partition=2 application/octet-stream u:p"; got != want {
				t.Fatalf("server saw %q, want %q", got, want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

// Through the Go client, an error answer still decodes into a client.Error with its status.
func TestBenchTransportCarriesErrorAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"topic \"t\" not found"}`))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithHTTPClient(&http.Client{Transport: newBenchTransport(2, nil)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTopic(context.Background(), "t", nil)
	if !client.IsStatus(err, http.StatusNotFound) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("GetTopic = %v, want the 404 error", err)
	}
}

// A request ends at its context's deadline even when the server has not answered.
func TestBenchTransportHonoursTheDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	hc := &http.Client{Transport: newBenchTransport(2, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/slow", nil)
	began := time.Now()
	_, err := hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do = %v, want the context's deadline", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the request ran %s past a 200 ms deadline", took)
	}
}

func TestBenchTransportRefusesOtherSchemes(t *testing.T) {
	hc := &http.Client{Transport: newBenchTransport(2, nil)}
	if _, err := hc.Get("ftp://127.0.0.1:1/x"); err == nil || !strings.Contains(err.Error(), "unsupported scheme") {
		t.Fatalf("ftp URL: %v, want an unsupported-scheme error", err)
	}
}
