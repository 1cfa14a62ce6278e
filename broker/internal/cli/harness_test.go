package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// testApp returns an app whose environment is env (never the process environment), with UTC
// display, no retry pauses and no progress lines.
func testApp(env map[string]string) *app {
	a := defaultApp(RootOptions{Version: "1.2.3-test"})
	a.getenv = func(k string) string { return env[k] }
	a.loc = time.UTC
	a.ackBackoff = func(int) time.Duration { return 0 }
	a.pollInterval = time.Millisecond
	a.progressTick = 0
	a.isTerminal = func(uintptr) bool { return false }
	return a
}

// result is the outcome of one CLI invocation.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the CLI with args under ctx and returns what it printed and its exit status.
func runCLI(ctx context.Context, a *app, stdin string, args ...string) result {
	root := newRoot(a)
	return runRoot(ctx, root, stdin, args...)
}

func runRoot(ctx context.Context, root *cobra.Command, stdin string, args ...string) result {
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := run(ctx, root)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// call is one request as a fake server received it.
type call struct {
	Method string
	Path   string
	Query  url.Values
	Body   string
	Auth   string
}

// fakeAPI routes "METHOD /path" to handlers and records every request. Unrouted requests get
// 404 {"error":"no route"}.
type fakeAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	routes map[string]http.HandlerFunc
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{routes: map[string]http.HandlerFunc{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		f.mu.Lock()
		f.calls = append(f.calls, call{r.Method, r.URL.Path, r.URL.Query(), string(b), r.Header.Get("Authorization")})
		h := f.routes[r.Method+" "+r.URL.Path]
		f.mu.Unlock()
		if h == nil {
			reply(w, 404, `{"error":"no route"}`)
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) handle(route string, h http.HandlerFunc) {
	f.mu.Lock()
	f.routes[route] = h
	f.mu.Unlock()
}

// fixed answers route with a constant status and body.
func (f *fakeAPI) fixed(route string, status int, body string) {
	f.handle(route, func(w http.ResponseWriter, _ *http.Request) { reply(w, status, body) })
}

func (f *fakeAPI) callsTo(method, path string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.Method == method && c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeAPI) allCalls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func reply(w http.ResponseWriter, status int, body string) {
	if body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// newServer serves h on a loopback httptest server and returns its URL.
func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
