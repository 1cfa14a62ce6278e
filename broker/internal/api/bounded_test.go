package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestMetricLabelsNeverCarryAClientChosenMethodOrPath: an unknown method is labelled "other"
// (also a known name in the wrong case), an unknown path "unmatched"; known methods keep
// their name.
func TestMetricLabelsNeverCarryAClientChosenMethodOrPath(t *testing.T) {
	env := newEnv(t)
	long := strings.Repeat("X", 10_000)
	env.do(long, "/v1/topics", "alice", nil)
	env.do("get", "/v1/topics", "alice", nil)
	env.do("BREW", "/v1/"+strings.Repeat("p", 5_000), "", nil)
	env.do(http.MethodGet, "/v1/topics", "alice", nil)
	env.do(http.MethodPatch, "/v1/no/such/route", "alice", nil)
	for _, got := range env.obs.routes {
		route, rest, _ := strings.Cut(got, "|")
		method, _, _ := strings.Cut(rest, "|")
		if method != otherMethod && !knownMethods[method] {
			t.Errorf("method label %.40q is not a known method or %q", method, otherMethod)
		}
		if route != unmatchedRoute && !strings.Contains(route, "/v1/topics") {
			t.Errorf("route label %.40q is neither a pattern nor %q", route, unmatchedRoute)
		}
	}
	want := []string{"|other|", "|other|", "unmatched|other|401", "GET /v1/topics|GET|200", "unmatched|PATCH|404"}
	for i, w := range want {
		if i >= len(env.obs.routes) || !strings.Contains(env.obs.routes[i], w) {
			t.Fatalf("observed %.200q, want entry %d to contain %q", env.obs.routes, i, w)
		}
	}
}

// TestErrorLogLinesBoundTheRequestMethodAndPath: a 500 logs the method and path cut to
// maxLoggedLen bytes.
func TestErrorLogLinesBoundTheRequestMethodAndPath(t *testing.T) {
	var buf bytes.Buffer
	env := newEnv(t, func(o *Options) {
		o.Auth = nil // security on without an authenticator: every request is a logged 500
		o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	method, path := strings.Repeat("M", 10_000), "/v1/topics/"+strings.Repeat("t", 10_000)
	expectStatus(t, env.do(method, path, "", nil), http.StatusInternalServerError)
	line := buf.String()
	if !strings.Contains(line, "authentication unavailable") {
		t.Fatalf("no error log line for the 500: %.300q", line)
	}
	if len(line) > 4*maxLoggedLen {
		t.Fatalf("log line is %d bytes for a 20 KB request line, want ≤ %d", len(line), 4*maxLoggedLen)
	}
	if !strings.Contains(line, strings.Repeat("M", maxLoggedLen)+"…") {
		t.Fatalf("log line lacks the cut method: %.300q", line)
	}
}

func TestLogValueCutsAtARuneBoundary(t *testing.T) {
	s := strings.Repeat("a", maxLoggedLen-1) + "é" + "tail"
	got := logValue(s)
	if got != strings.Repeat("a", maxLoggedLen-1)+"…" {
		t.Fatalf("logValue = %q", got[maxLoggedLen-8:])
	}
	if logValue("short") != "short" {
		t.Fatal("a short value was changed")
	}
}
