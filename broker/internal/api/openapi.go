package api

import (
	_ "embed"
	"net/http"
)

// openAPIPath is where the API describes itself (docs/internals/http-api.md §2.23).
const openAPIPath = "/v1/openapi.json"

// openAPIDocument is the OpenAPI 3.1 description of every route this package serves. It is
// the one source: docs/openapi.json is a byte-for-byte copy (openapi_test.go holds both to
// it), and the router may serve no route the document leaves out, nor the other way round.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI is GET /v1/openapi.json: the embedded document, without authentication (it
// describes the routes of this binary, no data of the cluster; exemptFromAuth).
func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) {
	writeRawJSON(w, http.StatusOK, openAPIDocument)
}

// routeTable registers the routes on the mux and keeps their patterns in registration order,
// so that a test can hold the router against the OpenAPI document.
type routeTable struct {
	mux      *http.ServeMux
	patterns []string
}

// HandleFunc registers h for pattern (a method and a path, as http.ServeMux reads them).
func (t *routeTable) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	t.Handle(pattern, http.HandlerFunc(h))
}

// Handle registers h for pattern, behind routed: the mux is the only router, and the
// handler tells ServeHTTP which route it serves.
func (t *routeTable) Handle(pattern string, h http.Handler) {
	t.mux.Handle(pattern, routed{pattern: pattern, h: h})
	t.patterns = append(t.patterns, pattern)
}

// routed marks a request as matched by pattern before h serves it (see statusWriter).
type routed struct {
	pattern string
	h       http.Handler
}

func (rt routed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if sw, ok := w.(*statusWriter); ok {
		sw.matched(rt.pattern)
	}
	rt.h.ServeHTTP(w, r)
}
