// Package api is Narad's client-facing HTTP /v1 surface (docs/internals/http-api.md): routing,
// authentication, request decoding and validation in the documented check order, and the
// mapping of Backend errors to status codes. It holds no broker state; every state read or
// change goes through Backend, or ClusterBackend for the /v1/cluster endpoints.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
)

// DefaultMaxConsumeWait is the long-poll ceiling used when Options.MaxConsumeWait is not
// positive (docs/internals/http-api.md §1.7).
const DefaultMaxConsumeWait = 10 * time.Second

// APIObserver receives the traffic events only the HTTP layer can see (docs/internals/metrics.md §2).
// Implementations must be safe for concurrent use; a nil APIObserver is allowed.
type APIObserver interface {
	// ProduceRejected counts a produce refused by the HTTP layer, reason "schema" or
	// "delayed_child" (one call per request, also for a batch). "draining" is the
	// Backend's to count: it is the one that refuses.
	ProduceRejected(topic, reason string)
	// ConsumeEmpty counts a consume answered 204.
	ConsumeEmpty(topic string)
	// ConsumeWait records the time a long-poll (wait > 0) queue consume spent in the
	// Backend; outcome is "hit", "timeout" or "cancelled".
	ConsumeWait(topic, outcome string, d time.Duration)
}

// Options configures NewHandler. Backend is required; everything else has a default.
type Options struct {
	Backend Backend
	// Auth checks credentials when SecurityEnabled. A nil Auth with security on answers
	// every non-exempt request 500 "authentication unavailable".
	Auth            Authenticator
	SecurityEnabled bool
	// MaxConsumeWait is the long-poll ceiling; consume wait is clamped to [0, it].
	// Not positive → DefaultMaxConsumeWait.
	MaxConsumeWait time.Duration
	// MaxPartitions is the partition-count ceiling for create and alter; not positive →
	// meta.MaxPartitions.
	MaxPartitions int
	// MaxInflightRequestBytes is the node-wide budget of produce body bytes held at once
	// (single and batch); a produce that does not fit is answered 503 with Retry-After.
	// Not positive → DefaultMaxInflightRequestBytes.
	MaxInflightRequestBytes int64
	// BcryptCost hashes new passwords; 0 → auth.DefaultBcryptCost (tests use bcrypt.MinCost).
	BcryptCost int
	// Observer receives one ObserveRequest per finished request (may be nil).
	Observer HTTPObserver
	// APIObserver receives produce-rejection and consume events (may be nil).
	APIObserver APIObserver
	// Metrics, when set, is mounted at GET /metrics without authentication.
	Metrics http.Handler
	// Cluster, when set, serves the /v1/cluster endpoints (members, decommission, moves,
	// move abort) behind the same authentication, recovery and observation.
	Cluster ClusterBackend
	// Routes mounts additional handlers (e.g. "GET /v1/cluster/members") on the same mux,
	// behind the same authentication, recovery and observation. CallerFromContext gives
	// them the authenticated user.
	Routes map[string]http.Handler
	// Logger receives error logs (500s, panics); nil → discard.
	Logger *slog.Logger
	// Audit receives the audit records of user and remote-link changes; nil → discard.
	Audit *audit.Logger
	// Now stamps user created/updated times; nil → time.Now.
	Now func() time.Time
}

// server is the handler built by NewHandler. Its fields are read-only after construction.
type server struct {
	be         Backend
	cluster    ClusterBackend // nil: no /v1/cluster endpoints
	authn      Authenticator
	security   bool
	maxWait    time.Duration
	maxParts   int
	budget     *requestBudget
	bcryptCost int
	obs        HTTPObserver
	events     APIObserver
	log        *slog.Logger
	auditLog   *audit.Logger
	now        func() time.Time
	mux        *http.ServeMux
	patterns   []string // every registered route pattern (openapi.go)
}

// NewHandler builds the /v1 HTTP handler (plus /healthz, /readyz and, when Options.Metrics
// is set, /metrics). It panics if opts.Backend is nil or a Routes pattern is invalid or
// conflicts with a built-in route (programming errors).
func NewHandler(opts Options) http.Handler {
	if opts.Backend == nil {
		panic("api: Options.Backend is nil")
	}
	s := &server{
		be:         opts.Backend,
		cluster:    opts.Cluster,
		authn:      opts.Auth,
		security:   opts.SecurityEnabled,
		maxWait:    opts.MaxConsumeWait,
		maxParts:   opts.MaxPartitions,
		budget:     newRequestBudget(opts.MaxInflightRequestBytes),
		bcryptCost: opts.BcryptCost,
		obs:        opts.Observer,
		events:     opts.APIObserver,
		log:        opts.Logger,
		auditLog:   opts.Audit,
		now:        opts.Now,
		mux:        http.NewServeMux(),
	}
	if s.maxWait <= 0 {
		s.maxWait = DefaultMaxConsumeWait
	}
	if s.maxParts <= 0 {
		s.maxParts = meta.MaxPartitions
	}
	if s.bcryptCost == 0 {
		s.bcryptCost = auth.DefaultBcryptCost
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.events == nil {
		s.events = nopEvents{}
	}
	s.routes(opts.Metrics, opts.Routes)
	return s
}

// routes registers every endpoint; the pattern strings double as the metrics route label.
func (s *server) routes(metrics http.Handler, extra map[string]http.Handler) {
	m := &routeTable{mux: s.mux}
	m.HandleFunc("POST /v1/topics", s.createTopic)
	m.HandleFunc("GET /v1/topics", s.listTopics)
	m.HandleFunc("GET /v1/topics/{topic}", s.describeTopic)
	m.HandleFunc("PATCH /v1/topics/{topic}", s.alterTopic)
	m.HandleFunc("DELETE /v1/topics/{topic}", s.deleteTopic)
	m.HandleFunc("POST /v1/topics/{topic}/produce", s.produce)
	m.HandleFunc("POST /v1/topics/{topic}/produce/batch", s.produceBatch)
	m.HandleFunc("GET /v1/topics/{topic}/consume", s.consume)
	m.HandleFunc("POST /v1/topics/{topic}/ack", s.ack)
	m.HandleFunc("POST /v1/topics/{topic}/ack/batch", s.ackBatch)
	m.HandleFunc("POST /v1/topics/{topic}/children", s.attachChild)
	m.HandleFunc("GET /v1/topics/{topic}/children", s.listChildren)
	m.HandleFunc("DELETE /v1/topics/{topic}/children/{child}", s.detachChild)
	m.HandleFunc("POST /v1/users", s.createUser)
	m.HandleFunc("GET /v1/users", s.listUsers)
	m.HandleFunc("GET /v1/users/{username}", s.getUser)
	m.HandleFunc("PUT /v1/users/{username}/grants", s.setGrants)
	m.HandleFunc("PUT /v1/users/{username}/password", s.setPassword)
	m.HandleFunc("DELETE /v1/users/{username}", s.deleteUser)
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET "+openAPIPath, s.openAPI)
	if metrics != nil {
		m.Handle("GET /metrics", metrics)
	}
	if s.cluster != nil {
		s.clusterRoutes(m)
	}
	for pattern, h := range extra {
		m.Handle(pattern, h)
	}
	s.patterns = m.patterns
}

// unmatchedRoute is the metrics route label of requests no pattern matched (404/405); raw
// paths never become label values.
const unmatchedRoute = "unmatched"

// ServeHTTP runs, in order: in-flight accounting, panic recovery, authentication (spec
// §1.2: before routing, so unknown routes also answer 401), then the mux, whose text 404/405
// answers are rewritten as JSON. The mux routes once: a matched route's handler reports its
// pattern through statusWriter.matched; when none runs, the mux's own answer was held back
// and is rewritten here.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if s.obs != nil {
		s.obs.InFlight(1)
	}
	sw := &statusWriter{ResponseWriter: w, route: unmatchedRoute}
	defer func() {
		if v := recover(); v != nil {
			sw.routing = false // whatever was held back, the 500 goes to the client
			if v == http.ErrAbortHandler {
				s.observe(sw.route, r, sw, start)
				panic(v)
			}
			s.log.Error("http handler panic", "route", sw.route, "panic", v, "stack", string(debug.Stack()))
			if !sw.wroteHeader {
				writeErrorBody(sw, http.StatusInternalServerError, "internal error", nil)
			}
		}
		s.observe(sw.route, r, sw, start)
	}()

	if !exemptFromAuth(r) {
		u, err := s.authenticate(r)
		if err != nil {
			if _, pattern := s.mux.Handler(r); pattern != "" {
				sw.route = pattern // a refused request still counts on its route
			}
			s.writeErr(sw, r, opAuthenticate, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, u))
	}
	sw.routing = true
	s.mux.ServeHTTP(sw, r)
	if sw.routing { // no route matched: the mux answered into sw.muxAnswer
		sw.routing = false
		s.serveUnmatched(sw, sw.muxAnswer)
	}
}

func (s *server) observe(route string, r *http.Request, sw *statusWriter, start time.Time) {
	if s.obs == nil {
		return
	}
	status := sw.status
	if !sw.wroteHeader {
		status = http.StatusOK
	}
	in := r.ContentLength
	if in < 0 {
		in = 0
	}
	s.obs.ObserveRequest(route, methodLabel(r.Method), status, time.Since(start), in, sw.bytes)
	s.obs.InFlight(-1)
}

// exemptFromAuth reports whether r is one of the probe/metrics reads that never need
// credentials (docs/internals/http-api.md §1.2: GET /healthz, /readyz, /metrics; HEAD is a GET without body),
// or the API's own description (§2.23).
func exemptFromAuth(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics", openAPIPath:
		return true
	}
	return false
}

// serveUnmatched passes on the mux's own answer c to a request no route matched
// (redirect, 404 or 405), its text error answers rewritten as JSON, keeping the Allow header.
func (s *server) serveUnmatched(w *statusWriter, c *captureWriter) {
	if c == nil {
		c = &captureWriter{}
	}
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.status < 400 {
		for k, v := range c.header {
			w.Header()[k] = v
		}
		w.WriteHeader(c.status)
		_, _ = w.Write(c.body)
		return
	}
	if allow := c.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	msg := "route not found"
	if c.status == http.StatusMethodNotAllowed {
		msg = "method not allowed"
	}
	writeErrorBody(w, c.status, msg, nil)
}

// callerKey is the context key of the authenticated *meta.User.
type callerKey struct{}

// rootCaller is the caller when security is off (docs/internals/http-api.md §1.2: user-management calls act as
// the root admin). It has no username, so no self-service rule ever matches it.
var rootCaller = &meta.User{Root: true, Grants: []meta.Grant{{Action: meta.ActionAdmin}}}

// CallerFromContext returns the authenticated user of a request handled by NewHandler's
// handler: a synthetic root admin with an empty username when security is off, nil on the
// unauthenticated probe paths (/healthz, /readyz, /metrics) and outside this package's
// handler.
func CallerFromContext(ctx context.Context) *meta.User {
	u, _ := ctx.Value(callerKey{}).(*meta.User)
	return u
}

// authenticate returns the caller; with security off every request is the root admin.
func (s *server) authenticate(r *http.Request) (*meta.User, error) {
	if !s.security {
		return rootCaller, nil
	}
	if s.authn == nil {
		return nil, errAuthUnavailable
	}
	u, err := s.authn.Authenticate(r)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, ErrUnauthenticated
	}
	return u, nil
}

// statusWriter records the status and body size of a response for observation and for
// the panic handler (which may only write a 500 if nothing was written yet). While routing
// is set (the mux is looking for a route) anything written goes to muxAnswer instead: only
// the mux's own redirect, 404 and 405 handlers write then, since a matched route's handler
// clears routing first (matched).
type statusWriter struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	route       string // metrics label: the matched pattern, else unmatchedRoute
	routing     bool
	muxAnswer   *captureWriter // allocated on the mux's first write while routing
}

// matched records that the mux found pattern; from here on writes reach the client.
func (w *statusWriter) matched(pattern string) {
	w.route, w.routing = pattern, false
}

// held returns the buffer of the mux's own answer.
func (w *statusWriter) held() *captureWriter {
	if w.muxAnswer == nil {
		w.muxAnswer = &captureWriter{header: http.Header{}}
	}
	return w.muxAnswer
}

func (w *statusWriter) Header() http.Header {
	if w.routing {
		return w.held().Header()
	}
	return w.ResponseWriter.Header()
}

func (w *statusWriter) WriteHeader(code int) {
	if w.routing {
		w.held().WriteHeader(code)
		return
	}
	if !w.wroteHeader {
		w.status = code
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.routing {
		return w.held().Write(b)
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// captureWriter buffers the mux's own answer for an unmatched route.
type captureWriter struct {
	header http.Header
	status int
	body   []byte
}

func (c *captureWriter) Header() http.Header { return c.header }

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body = append(c.body, b...)
	return len(b), nil
}

// nopEvents is the APIObserver used when none is configured.
type nopEvents struct{}

func (nopEvents) ProduceRejected(string, string)            {}
func (nopEvents) ConsumeEmpty(string)                       {}
func (nopEvents) ConsumeWait(string, string, time.Duration) {}
