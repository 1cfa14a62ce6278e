package fanout

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/hostlist"
)

// checkReasons is the fixed set an attach may answer.
var checkReasons = []string{RemoteUnreachable, RemoteTLSError, RemoteUnauthorized, RemoteTopicMissing,
	RemoteTargetDelayChild, RemoteRedirectRefused, RemoteBadAnswer, RemoteNotAllowedHost}

// internalService stands for an address only the broker can reach: it counts its hits.
func internalService(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"name":"plain","secret":"INTERNAL-SECRET"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// A target that answers with a redirect is refused (redirect_refused), both by the attach
// check and by the sender; the redirect's destination is never asked.
func TestRemoteRedirectsAreRefusedNeverFollowed(t *testing.T) {
	internal, hits := internalService(t)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, internal.URL+r.URL.Path, code)
		}))
		target := RemoteTarget{URLs: []string{redirector.URL}, Topic: "plain", User: "u", Password: "pw"}
		err := CheckTarget(context.Background(), target, nil)
		if CheckReason(err) != RemoteRedirectRefused {
			t.Errorf("check, %d: reason %q (%v), want %s", code, CheckReason(err), err, RemoteRedirectRefused)
		}
		_, err = NewSender(target, nil).Send(context.Background(), 0, testEntries(3, 1))
		if StateOf(err) != RemoteRedirectRefused {
			t.Errorf("send, %d: state %q (%v), want %s", code, StateOf(err), err, RemoteRedirectRefused)
		}
		// A client the caller supplies (tests, the engine) is guarded the same way.
		err = CheckTarget(context.Background(), target, &http.Client{})
		if CheckReason(err) != RemoteRedirectRefused {
			t.Errorf("check with a given client, %d: reason %q", code, CheckReason(err))
		}
		redirector.Close()
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect destination was asked %d times", n)
	}
}

// Whatever the target answers, neither the check's error nor the sender's last error holds a
// byte of the answer's body, and the check reports one of the fixed reasons.
func TestRemoteErrorsNeverEchoTheTargetsAnswer(t *testing.T) {
	const secret = "INTERNAL-SECRET-4711"
	for _, tc := range []struct {
		status int
		body   string
		want   string // check reason
	}{
		{http.StatusOK, "<html>" + secret + "</html>", RemoteBadAnswer},
		{http.StatusOK, `{"name":"other","note":"` + secret + `"}`, RemoteBadAnswer},
		{http.StatusUnauthorized, `{"error":"` + secret + `"}`, RemoteUnauthorized},
		{http.StatusForbidden, secret, RemoteUnauthorized},
		{http.StatusNotFound, `{"error":"` + secret + `"}`, RemoteTopicMissing},
		{http.StatusBadRequest, `{"error":"` + secret + `"}`, RemoteBadAnswer},
		{http.StatusTeapot, secret, RemoteBadAnswer},
		{http.StatusInternalServerError, `{"error":"` + secret + `"}`, RemoteUnreachable},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		target := RemoteTarget{URLs: []string{srv.URL}, Topic: "plain", User: "u", Password: "pw"}
		err := CheckTarget(context.Background(), target, nil)
		if err == nil || CheckReason(err) != tc.want || strings.Contains(err.Error(), secret) {
			t.Errorf("check, %d %q: reason %q, error %v; want %s without the body", tc.status, tc.body, CheckReason(err), err, tc.want)
		}
		if !slices.Contains(checkReasons, CheckReason(err)) {
			t.Errorf("reason %q outside the fixed set", CheckReason(err))
		}
		s := NewSender(target, nil)
		s.Quick = []time.Duration{}
		if _, err := s.Send(context.Background(), 0, testEntries(3, 1)); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("send, %d: %v; want a failure without the body", tc.status, err)
		}
		srv.Close()
	}
}

// A TLS target whose certificate is not trusted is tls_error; the error does not quote the
// certificate (whose names the target chooses).
func TestRemoteTLSFailureIsAFixedReason(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	err := CheckTarget(context.Background(), RemoteTarget{URLs: []string{srv.URL}, Topic: "plain"}, nil)
	if CheckReason(err) != RemoteTLSError || strings.Contains(err.Error(), "example.com") || strings.Contains(err.Error(), "x509") {
		t.Fatalf("untrusted certificate: reason %q, %v", CheckReason(err), err)
	}
}

// An answer past MaxRemoteAnswer bytes is not read to its end: a description padded beyond
// the bound fails the check instead of being buffered whole.
func TestRemoteAnswersAreReadUpToTheBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"name":"plain"` + strings.Repeat(" ", MaxRemoteAnswer) + `}`))
	}))
	defer srv.Close()
	if err := CheckTarget(context.Background(), RemoteTarget{URLs: []string{srv.URL}, Topic: "plain"}, nil); err == nil {
		t.Fatal("an answer over the bound passed the check")
	}
}

// With an allow-list, a target off the list is refused by the check and by the sender
// without a request; one on the list is asked as usual.
func TestRemoteAllowedHostsRefuseOtherTargets(t *testing.T) {
	ft := &fakeTarget{}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	other, hits := internalService(t)
	allowed, err := hostlist.Parse([]string{strings.TrimPrefix(srv.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	for _, urls := range [][]string{{other.URL}, {srv.URL, other.URL}} {
		target := RemoteTarget{URLs: urls, Topic: "t", Allowed: allowed}
		if err := CheckTarget(context.Background(), target, nil); CheckReason(err) != RemoteNotAllowedHost {
			t.Errorf("check %v: reason %q (%v), want %s", urls, CheckReason(err), err, RemoteNotAllowedHost)
		}
	}
	if _, err := NewSender(RemoteTarget{URLs: []string{other.URL}, Topic: "t", Allowed: allowed}, nil).
		Send(context.Background(), 0, testEntries(3, 1)); StateOf(err) != RemoteNotAllowedHost {
		t.Errorf("send to a host off the list: %q (%v)", StateOf(err), err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("a host off the list was asked %d times", n)
	}
	target := RemoteTarget{URLs: []string{srv.URL}, Topic: "t", Allowed: allowed}
	if err := CheckTarget(context.Background(), target, nil); err != nil {
		t.Fatalf("check of an allowed host: %v", err)
	}
	if _, err := NewSender(target, nil).Send(context.Background(), 0, testEntries(3, 1)); err != nil {
		t.Fatalf("send to an allowed host: %v", err)
	}
}
