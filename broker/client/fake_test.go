package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// seen is one request as the fake server received it.
type seen struct {
	Method string
	Path   string // decoded path
	Raw    string // escaped path
	Query  url.Values
	Body   string
	Header http.Header
}

// fake is an httptest server that answers every request with the configured reply and
// records what it received.
type fake struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []seen
	status int
	body   string
	reply  func(w http.ResponseWriter, r *http.Request) // overrides status/body when set
}

func newFake(t *testing.T, status int, body string) *fake {
	t.Helper()
	f := &fake{status: status, body: body}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{Method: r.Method, Path: r.URL.Path, Raw: r.URL.EscapedPath(),
			Query: r.URL.Query(), Body: string(b), Header: r.Header.Clone()})
		reply, status, body := f.reply, f.status, f.body
		f.mu.Unlock()
		if reply != nil {
			reply(w, r)
			return
		}
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := New(f.srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fake) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request reached the fake server")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func ptr[T any](v T) *T { return &v }
