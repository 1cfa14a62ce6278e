package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

// fakeAuth authenticates Basic credentials against the fake backend's users; every
// user's password is "pw-"+username (the real Authenticator is not under test here).
type fakeAuth struct {
	be  *fakeBackend
	err error // when set, every Authenticate fails with it
}

func (a *fakeAuth) Authenticate(r *http.Request) (*meta.User, error) {
	if a.err != nil {
		return nil, a.err
	}
	name, pw, ok := r.BasicAuth()
	if !ok {
		return nil, ErrUnauthenticated
	}
	a.be.mu.Lock()
	u, found := a.be.users[name]
	a.be.mu.Unlock()
	if !found || pw != "pw-"+name {
		return nil, ErrUnauthenticated
	}
	return &u, nil
}

// fakeEvents records APIObserver calls.
type fakeEvents struct {
	mu       sync.Mutex
	rejected []string // topic/reason
	empty    []string
	waits    []string // topic/outcome
}

func (e *fakeEvents) ProduceRejected(topic, reason string) {
	e.mu.Lock()
	e.rejected = append(e.rejected, topic+"/"+reason)
	e.mu.Unlock()
}

func (e *fakeEvents) ConsumeEmpty(topic string) {
	e.mu.Lock()
	e.empty = append(e.empty, topic)
	e.mu.Unlock()
}

func (e *fakeEvents) ConsumeWait(topic, outcome string, _ time.Duration) {
	e.mu.Lock()
	e.waits = append(e.waits, topic+"/"+outcome)
	e.mu.Unlock()
}

// fakeObserver records ObserveRequest calls.
type fakeObserver struct {
	mu       sync.Mutex
	routes   []string
	inflight int
}

func (o *fakeObserver) ObserveRequest(route, method string, status int, _ time.Duration, _, _ int64) {
	o.mu.Lock()
	o.routes = append(o.routes, fmt.Sprintf("%s|%s|%d", route, method, status))
	o.mu.Unlock()
}

func (o *fakeObserver) InFlight(d int) {
	o.mu.Lock()
	o.inflight += d
	o.mu.Unlock()
}

// testEnv is a handler over a fake backend with these users (password = "pw-" + name):
// root (root admin), ops (admin grant), alice (produce/consume/create on "orders*"),
// bob (no grants).
type testEnv struct {
	t      *testing.T
	be     *fakeBackend
	events *fakeEvents
	obs    *fakeObserver
	h      http.Handler
}

func newEnv(t *testing.T, mutate ...func(*Options)) *testEnv {
	t.Helper()
	be := newFakeBackend()
	add := func(u meta.User) {
		u.PasswordHash = testHash(t, "pw-"+u.Username)
		be.users[u.Username] = u
	}
	add(meta.User{Username: "root", Root: true, Grants: []meta.Grant{{Action: meta.ActionAdmin}}})
	add(meta.User{Username: "ops", Grants: []meta.Grant{{Action: meta.ActionAdmin}}})
	add(meta.User{Username: "alice", Grants: []meta.Grant{
		{Action: meta.ActionProduce, Patterns: []string{"orders*"}},
		{Action: meta.ActionConsume, Patterns: []string{"orders*"}},
		{Action: meta.ActionCreate, Patterns: []string{"orders*"}},
	}})
	add(meta.User{Username: "bob"})
	env := &testEnv{t: t, be: be, events: &fakeEvents{}, obs: &fakeObserver{}}
	opts := Options{
		Backend:         be,
		Auth:            &fakeAuth{be: be},
		SecurityEnabled: true,
		MaxConsumeWait:  10 * time.Second,
		BcryptCost:      bcrypt.MinCost,
		Observer:        env.obs,
		APIObserver:     env.events,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "narad_up 1\n")
		}),
	}
	for _, m := range mutate {
		m(&opts)
	}
	env.h = NewHandler(opts)
	return env
}

// do sends a request as user (password "pw-"+user; "" = no credentials).
func (e *testEnv) do(method, target, user string, body []byte) *httptest.ResponseRecorder {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if user != "" {
		req.SetBasicAuth(user, "pw-"+user)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// expectStatus fails unless rec has status want; error statuses must be JSON with "error".
func expectStatus(t *testing.T, rec *httptest.ResponseRecorder, want int) {
	t.Helper()
	if rec.Code != want {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, want, rec.Body.String())
	}
	if want >= 400 {
		expectJSONError(t, rec)
	}
}

// expectJSONError checks the error-body contract of docs/internals/http-api.md §1.5.
func expectJSONError(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json (status %d)", ct, rec.Code)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body is not JSON: %v: %q", err, rec.Body.String())
	}
	if msg, ok := body["error"].(string); !ok || msg == "" {
		t.Fatalf("error body lacks a non-empty \"error\": %s", rec.Body.String())
	}
	if !strings.HasSuffix(rec.Body.String(), "\n") {
		t.Fatalf("body does not end in newline: %q", rec.Body.String())
	}
	return body
}

var (
	hashMu    sync.Mutex
	hashCache = map[string]string{}
)

// testHash returns a bcrypt hash of pw at MinCost, computed once per password (bcrypt is
// slow under the race detector).
func testHash(t *testing.T, pw string) string {
	t.Helper()
	hashMu.Lock()
	defer hashMu.Unlock()
	if h, ok := hashCache[pw]; ok {
		return h
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hashCache[pw] = string(h)
	return string(h)
}
