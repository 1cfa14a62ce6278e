package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/schema"
)

func TestUnknownRouteIs404JSON(t *testing.T) {
	env := newEnv(t)
	for _, path := range []string{"/v1/nope", "/v2/topics", "/v1/topics/a/b/c", "/"} {
		rec := env.do("GET", path, "alice", nil)
		expectStatus(t, rec, http.StatusNotFound)
	}
}

func TestWrongMethodIs405WithAllowHeaderAndJSONBody(t *testing.T) {
	env := newEnv(t)
	cases := []struct {
		method, path string
		allow        []string
	}{
		{"PUT", "/v1/topics", []string{"GET", "POST"}},
		{"POST", "/v1/topics/orders", []string{"DELETE", "GET", "PATCH"}},
		{"GET", "/v1/topics/orders/produce", []string{"POST"}},
		{"DELETE", "/v1/users", []string{"GET", "POST"}},
		{"POST", "/healthz", []string{"GET"}},
	}
	for _, c := range cases {
		rec := env.do(c.method, c.path, "alice", nil)
		expectStatus(t, rec, http.StatusMethodNotAllowed)
		allow := rec.Header().Get("Allow")
		for _, m := range c.allow {
			if !strings.Contains(allow, m) {
				t.Errorf("%s %s: Allow %q lacks %s", c.method, c.path, allow, m)
			}
		}
	}
}

func TestMissingCredentialsIs401WithBasicChallenge(t *testing.T) {
	env := newEnv(t)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/topics"},
		{"GET", "/v1/does-not-exist"}, // authentication runs before routing
		{"POST", "/healthz"},          // only GET probes are exempt
	} {
		rec := env.do(c.method, c.path, "", nil)
		expectStatus(t, rec, http.StatusUnauthorized)
		if got := rec.Header().Get("WWW-Authenticate"); got != `Basic realm="narad"` {
			t.Errorf("%s %s: WWW-Authenticate = %q", c.method, c.path, got)
		}
	}
	req := httptest.NewRequest("GET", "/v1/topics", nil)
	req.SetBasicAuth("alice", "wrong")
	rec := httptest.NewRecorder()
	env.h.ServeHTTP(rec, req)
	expectStatus(t, rec, http.StatusUnauthorized)
}

func TestAuthErrorsMapToDocumentedStatuses(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		want       int
		header     string
		headerWant string
		body       string
	}{
		{"throttled is 429 with Retry-After", ErrThrottled, 429, "Retry-After", "12", "too many failed authentication attempts"},
		{"auth package throttled is 429", fmt.Errorf("%w: user x", auth.ErrThrottled), 429, "Retry-After", "12", ""},
		{"auth package unauthenticated is 401", auth.ErrUnauthenticated, 401, "WWW-Authenticate", `Basic realm="narad"`, "authentication required"},
		{"store failure is 500 authentication unavailable", errors.New("disk on fire"), 500, "", "", "authentication unavailable"},
		{"auth package unavailable is 500", auth.ErrUnavailable, 500, "", "", "authentication unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t, func(o *Options) { o.Auth = &fakeAuth{err: c.err} })
			rec := env.do("GET", "/v1/topics", "alice", nil)
			expectStatus(t, rec, c.want)
			if c.header != "" && rec.Header().Get(c.header) != c.headerWant {
				t.Errorf("%s = %q, want %q", c.header, rec.Header().Get(c.header), c.headerWant)
			}
			if c.body != "" && !strings.Contains(rec.Body.String(), c.body) {
				t.Errorf("body %s lacks %q", rec.Body.String(), c.body)
			}
		})
	}
}

func TestProbesAndMetricsNeedNoCredentials(t *testing.T) {
	env := newEnv(t)
	for path, want := range map[string]string{
		"/healthz": `{"status":"ok"}`, "/readyz": `{"status":"ready"}`, "/metrics": "narad_up 1",
	} {
		rec := env.do("GET", path, "", nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s = %d %q, want 200 containing %q", path, rec.Code, rec.Body.String(), want)
		}
	}
}

func TestHealthAndReadinessReport503WithJSON(t *testing.T) {
	env := newEnv(t)
	env.be.shutting = true
	env.be.ready = errors.New("metastore catching up")
	rec := env.do("GET", "/healthz", "", nil)
	expectStatus(t, rec, 503)
	if !strings.Contains(rec.Body.String(), `"status":"shutting down"`) {
		t.Errorf("healthz body %s", rec.Body.String())
	}
	rec = env.do("GET", "/readyz", "", nil)
	expectStatus(t, rec, 503)
	if !strings.Contains(rec.Body.String(), "metastore catching up") {
		t.Errorf("readyz body %s", rec.Body.String())
	}
}

func TestPanicInHandlerBecomes500JSON(t *testing.T) {
	env := newEnv(t)
	env.be.panicOnRead = true
	rec := env.do("GET", "/v1/topics/orders", "alice", nil)
	expectStatus(t, rec, http.StatusInternalServerError)
	if env.obs.inflight != 0 {
		t.Errorf("in-flight gauge = %d after a panic, want 0", env.obs.inflight)
	}
}

func TestObserverGetsMatchedRoutePatternAndBalancedInFlight(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	env.do("POST", "/v1/topics/orders/produce", "alice", []byte("x"))
	env.do("GET", "/v1/topics/orders", "", nil)
	env.do("GET", "/v1/nope", "alice", nil)
	want := []string{
		"POST /v1/topics/{topic}/produce|POST|202",
		"GET /v1/topics/{topic}|GET|401",
		"unmatched|GET|404",
	}
	if !slices.Equal(env.obs.routes, want) {
		t.Errorf("observed %q, want %q", env.obs.routes, want)
	}
	if env.obs.inflight != 0 {
		t.Errorf("in-flight = %d, want 0", env.obs.inflight)
	}
}

func TestExtraRoutesAreAuthenticatedAndSeeTheCaller(t *testing.T) {
	var seen string
	env := newEnv(t, func(o *Options) {
		o.Routes = map[string]http.Handler{"GET /v1/cluster/members": http.HandlerFunc(
			func(w http.ResponseWriter, r *http.Request) {
				seen = CallerFromContext(r.Context()).Username
				w.WriteHeader(200)
			})}
	})
	expectStatus(t, env.do("GET", "/v1/cluster/members", "", nil), 401)
	if rec := env.do("GET", "/v1/cluster/members", "bob", nil); rec.Code != 200 || seen != "bob" {
		t.Fatalf("status %d, caller %q; want 200 and bob", rec.Code, seen)
	}
}

func TestSecurityOffNeedsNoCredentialsAndGivesNoOwner(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.SecurityEnabled = false; o.Auth = nil })
	rec := env.do("POST", "/v1/topics", "", []byte(`{"name":"t1","owner":"mallory"}`))
	expectStatus(t, rec, http.StatusCreated)
	if env.be.created[0].Owner != "" {
		t.Errorf("owner = %q with security off, want none", env.be.created[0].Owner)
	}
	// user management acts as the root admin: it may grant admin.
	rec = env.do("POST", "/v1/users", "", []byte(`{"username":"carol","password":"x","grants":[{"action":"admin"}]}`))
	expectStatus(t, rec, http.StatusCreated)
}

func TestSecurityOnWithoutAuthenticatorIs500(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.Auth = nil })
	rec := env.do("GET", "/v1/topics", "alice", nil)
	expectStatus(t, rec, 500)
	if !strings.Contains(rec.Body.String(), "authentication unavailable") {
		t.Errorf("body %s", rec.Body.String())
	}
}

func TestEveryErrorResponseIsJSON(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders"})
	env.be.addTopic(meta.Topic{Name: "orders-delayed", Parent: "orders", FanoutDelayMs: 1000, Role: meta.RoleChild})
	env.be.produceErr = fmt.Errorf("wal: %w", ErrUnavailable)
	reqs := []struct {
		method, path, user, body string
	}{
		{"GET", "/v1/topics?limit=0", "alice", ""},
		{"POST", "/v1/topics", "alice", "{"},
		{"POST", "/v1/topics", "bob", `{"name":"x"}`},
		{"GET", "/v1/topics/missing", "alice", ""},
		{"PATCH", "/v1/topics/orders", "alice", `{}`},
		{"POST", "/v1/topics/orders-delayed/produce", "root", "x"},
		{"POST", "/v1/topics/orders/produce", "alice", "x"},
		{"POST", "/v1/topics/orders/produce", "alice", ""},
		{"GET", "/v1/topics/orders/consume?wait=5", "alice", ""},
		{"POST", "/v1/topics/orders/ack", "alice", ""},
		{"GET", "/v1/users", "alice", ""},
		{"DELETE", "/v1/topics", "alice", ""},
	}
	for _, q := range reqs {
		var body []byte
		if q.body != "" {
			body = []byte(q.body)
		}
		rec := env.do(q.method, q.path, q.user, body)
		if rec.Code < 400 {
			t.Errorf("%s %s: status %d, want an error", q.method, q.path, rec.Code)
			continue
		}
		expectJSONError(t, rec)
	}
}

func TestStatusOfMapsEverySentinel(t *testing.T) {
	cases := map[error]int{
		ErrNotFound: 404, ErrExists: 409, ErrConflict: 409, ErrInvalid: 400, ErrNoLeader: 503,
		ErrSchema: 400, ErrDelayedChild: 409, ErrDraining: 503, ErrUnavailable: 503,
		ErrOwnerDown: 503, ErrStale: 410, ErrAckedAheadFull: 503, ErrGone: 410,
		ErrUnauthenticated: 401, ErrThrottled: 429, ErrForbidden: 403, ErrTooLarge: 413,
		meta.ErrTimeout: 503, meta.ErrClosed: 503, auth.ErrForbidden: 403, auth.ErrInvalid: 400,
		auth.ErrUnauthenticated: 401, auth.ErrThrottled: 429, auth.ErrUnavailable: 500,
		schema.ErrInvalidSchema: 400, schema.ErrViolation: 400, schema.ErrIncompatible: 400,
		context.DeadlineExceeded: 503,
		errors.New("mystery"):    500,
	}
	for err, want := range cases {
		if got := statusOf(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("statusOf(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestInternalErrorShowsOnlyOpFailed(t *testing.T) {
	env := newEnv(t)
	env.be.createErr = errors.New("secret pebble detail")
	rec := env.do("POST", "/v1/topics", "alice", []byte(`{"name":"orders-x"}`))
	expectStatus(t, rec, 500)
	if got := strings.TrimSpace(rec.Body.String()); got != `{"error":"create topic failed"}` {
		t.Errorf("body %s", got)
	}
}
