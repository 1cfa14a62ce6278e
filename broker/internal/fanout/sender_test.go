package fanout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
)

// fakeTarget is a target cluster's batch produce: it records what it accepted and answers
// with the status its script gives.
type fakeTarget struct {
	mu       sync.Mutex
	got      []plog.Entry // accepted records, arrival order
	batches  int
	status   func(call int, recs []plog.Entry) int // nil → 202
	calls    int
	auth     string
	maxBatch int
	short    int // 202 answers report this many records fewer than sent
}

func (f *fakeTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Records []struct {
			Key      *string `json:"key"`
			Payload  string  `json:"payload"`
			Encoding string  `json:"payload_encoding"`
		} `json:"records"`
	}
	if r.Method == http.MethodGet {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"name":"t"}`))
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	recs := make([]plog.Entry, len(body.Records))
	for i, rec := range body.Records {
		if rec.Encoding != "base64" {
			http.Error(w, `{"error":"not base64"}`, http.StatusBadRequest)
			return
		}
		p, err := base64.StdEncoding.DecodeString(rec.Payload)
		if err != nil {
			http.Error(w, `{"error":"bad base64"}`, http.StatusBadRequest)
			return
		}
		recs[i].Payload = p
		if rec.Key != nil {
			recs[i].Key = []byte(*rec.Key)
		}
	}
	f.mu.Lock()
	f.calls++
	call := f.calls
	u, p, _ := r.BasicAuth()
	f.auth = u + ":" + p
	f.maxBatch = max(f.maxBatch, len(recs))
	st := http.StatusAccepted
	if f.status != nil {
		st = f.status(call, recs)
	}
	if st == http.StatusAccepted {
		f.got = append(f.got, recs...)
		f.batches++
	}
	short := f.short
	f.mu.Unlock()
	w.WriteHeader(st)
	if st != http.StatusAccepted {
		_, _ = w.Write([]byte(`{"error":"scripted"}`))
		return
	}
	_, _ = fmt.Fprintf(w, `{"accepted":%d}`, len(recs)-short)
}

func (f *fakeTarget) accepted() []plog.Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func testEntries(n, keys int) []plog.Entry {
	es := make([]plog.Entry, n)
	for i := range es {
		if keys > 0 {
			es[i].Key = []byte{'k', byte('a' + i%keys)}
		}
		es[i].Payload = []byte{byte(i), byte(i >> 8), 0xff, 0} // not UTF-8: must arrive exact
	}
	return es
}

func newTestSender(urls ...string) *Sender {
	s := NewSender(RemoteTarget{URLs: urls, Topic: "t", User: "u", Password: "secret-pw"}, nil)
	s.Quick, s.Records = []time.Duration{time.Millisecond, time.Millisecond}, 7
	return s
}

func TestSenderLanesKeepPerKeyOrderAndBytes(t *testing.T) {
	ft := &fakeTarget{}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	s := newTestSender(srv.URL)
	in := testEntries(200, 5)
	sent, err := s.Send(context.Background(), 1, in)
	if err != nil {
		t.Fatal(err)
	}
	got := ft.accepted()
	if len(got) != len(in) {
		t.Fatalf("target got %d records, want %d", len(got), len(in))
	}
	var want int64
	for _, e := range in {
		want += int64(len(e.Key) + len(e.Payload))
	}
	if sent != want {
		t.Fatalf("sent bytes %d, want %d", sent, want)
	}
	if ft.maxBatch > 7 {
		t.Fatalf("a batch held %d records over the cap 7", ft.maxBatch)
	}
	if ft.auth != "u:secret-pw" {
		t.Fatalf("basic auth %q", ft.auth)
	}
	perKey := func(es []plog.Entry) map[string][]string {
		m := map[string][]string{}
		for _, e := range es {
			m[string(e.Key)] = append(m[string(e.Key)], string(e.Payload))
		}
		return m
	}
	w, g := perKey(in), perKey(got)
	for k := range w {
		if !slices.Equal(w[k], g[k]) {
			t.Fatalf("key %q: order or bytes differ", k)
		}
	}
}

func TestSenderKeylessRecordsOfOnePartitionStayInOrder(t *testing.T) {
	ft := &fakeTarget{}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	in := testEntries(50, 0)
	if _, err := newTestSender(srv.URL).Send(context.Background(), 3, in); err != nil {
		t.Fatal(err)
	}
	got := ft.accepted()
	if !slices.EqualFunc(in, got, func(a, b plog.Entry) bool { return string(a.Payload) == string(b.Payload) }) {
		t.Fatal("keyless records of one parent partition arrived out of order")
	}
}

func TestSenderFailureStates(t *testing.T) {
	for _, tc := range []struct {
		status int
		state  string
	}{
		{http.StatusUnauthorized, RemoteUnauthorized},
		{http.StatusForbidden, RemoteUnauthorized},
		{http.StatusNotFound, RemoteTopicMissing},
		{http.StatusBadRequest, RemoteRejected},
		{http.StatusRequestEntityTooLarge, RemoteRejected},
		{http.StatusConflict, RemoteRejected},
		{http.StatusServiceUnavailable, RemoteUnreachable},
	} {
		ft := &fakeTarget{status: func(int, []plog.Entry) int { return tc.status }}
		srv := httptest.NewServer(ft)
		_, err := newTestSender(srv.URL).Send(context.Background(), 0, testEntries(10, 2))
		srv.Close()
		if StateOf(err) != tc.state {
			t.Fatalf("status %d: state %q (%v), want %q", tc.status, StateOf(err), err, tc.state)
		}
		if strings.Contains(err.Error(), "secret-pw") {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
}

func TestSenderUnreachableTargetAndFailover(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connection refused
	ft := &fakeTarget{}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	if _, err := newTestSender(deadURL).Send(context.Background(), 0, testEntries(3, 1)); StateOf(err) != RemoteUnreachable {
		t.Fatalf("dead target: %v", err)
	}
	if _, err := newTestSender(deadURL, srv.URL).Send(context.Background(), 0, testEntries(3, 1)); err != nil {
		t.Fatalf("failover to the second url: %v", err)
	}
	if n := len(ft.accepted()); n != 3 {
		t.Fatalf("second url got %d records", n)
	}
}

// A 202 whose count is short of the batch is not a reason to advance: the slab is refused
// (read again later) rather than risk a gap.
func TestSenderShortAcceptedCountIsRejected(t *testing.T) {
	ft := &fakeTarget{short: 1}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	_, err := newTestSender(srv.URL).Send(context.Background(), 0, testEntries(5, 1))
	if StateOf(err) != RemoteRejected || !strings.Contains(err.Error(), "accepted 4 of 5") {
		t.Fatalf("short 202: %v", err)
	}
}

// A target that takes the request but never answers shows as target_unreachable once the
// answer bound passes, and the batch is not asked again at once (no quick retry).
func TestSenderSilentTargetIsUnreachableWithoutQuickRetry(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	hc := NewRemoteHTTPClient()
	hc.Transport.(*http.Transport).ResponseHeaderTimeout = 50 * time.Millisecond
	s := NewSender(RemoteTarget{URLs: []string{srv.URL}, Topic: "t"}, hc)
	s.Quick = []time.Duration{time.Millisecond, time.Millisecond}
	_, err := s.Send(context.Background(), 0, testEntries(3, 1))
	if StateOf(err) != RemoteUnreachable || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("silent target: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("silent target asked %d times, want 1 (no quick retry after a timeout)", n)
	}
}

// Failover keeps to the URL that answered last: after the first URL died and the second
// answered, later batches go to the second one first.
func TestSenderPrefersTheURLThatAnsweredLast(t *testing.T) {
	var deadCalls atomic.Int32
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		deadCalls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer dead.Close()
	ft := &fakeTarget{}
	srv := httptest.NewServer(ft)
	defer srv.Close()
	s := newTestSender(dead.URL, srv.URL)
	s.Lanes = 1
	for range 3 {
		if _, err := s.Send(context.Background(), 0, testEntries(3, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := deadCalls.Load(); n != 1 {
		t.Fatalf("the failing url was asked %d times, want once", n)
	}
}

func TestCheckTargetReasons(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/topics/{t}", func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); u != "u" || p != "pw" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.PathValue("t") {
		case "plain":
			_, _ = w.Write([]byte(`{"name":"plain","role":"standalone"}`))
		case "delayed":
			_, _ = w.Write([]byte(`{"name":"delayed","parent":"p","fanout_delay_ms":5000}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dead := httptest.NewServer(mux)
	deadURL := dead.URL
	dead.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		t    RemoteTarget
		want string
	}{
		{RemoteTarget{URLs: []string{srv.URL}, Topic: "plain", User: "u", Password: "pw"}, ""},
		{RemoteTarget{URLs: []string{deadURL, srv.URL}, Topic: "plain", User: "u", Password: "pw"}, ""},
		{RemoteTarget{URLs: []string{srv.URL}, Topic: "plain", User: "u", Password: "bad"}, RemoteUnauthorized},
		{RemoteTarget{URLs: []string{srv.URL}, Topic: "nope", User: "u", Password: "pw"}, RemoteTopicMissing},
		{RemoteTarget{URLs: []string{srv.URL}, Topic: "delayed", User: "u", Password: "pw"}, RemoteTargetDelayChild},
		{RemoteTarget{URLs: []string{deadURL}, Topic: "plain", User: "u", Password: "pw"}, RemoteUnreachable},
	} {
		err := CheckTarget(ctx, tc.t, nil)
		if StateOf(err) != tc.want {
			t.Fatalf("%+v: got %q (%v), want %q", tc.t.Topic, StateOf(err), err, tc.want)
		}
	}
}

func TestRemoteBackoffIsJitteredAndCapped(t *testing.T) {
	for n := 1; n < 40; n++ {
		d := remoteBackoff(time.Second, 30*time.Second, n)
		if d > 30*time.Second || d < 500*time.Millisecond {
			t.Fatalf("failure %d: backoff %v outside [0.5s, 30s]", n, d)
		}
	}
	if d := remoteBackoff(time.Second, 30*time.Second, 20); d < 15*time.Second {
		t.Fatalf("backoff after 20 failures %v below half the cap", d)
	}
}

// A target that throttles the link's user after refused logins answers 429: still the
// credentials' fault (unauthorized, not unreachable). While refused, a slab is probed with
// one lane only, so the link does not keep the user locked out with a request per lane; once
// the credentials work again every record goes through.
func TestSenderThrottledLoginsAreUnauthorizedAndProbedWithOneLane(t *testing.T) {
	var (
		mu    sync.Mutex
		wrong = true
		posts int
	)
	ft := &fakeTarget{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := wrong
		if r.Method == http.MethodPost {
			posts++
		}
		n := posts
		mu.Unlock()
		switch {
		case !refuse:
			ft.ServeHTTP(w, r)
		case n <= 2:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"authentication required"}`))
		default:
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"too many failed authentication attempts"}`))
		}
	}))
	defer srv.Close()
	s := newTestSender(srv.URL)
	s.Lanes = 8
	entries := testEntries(40, 8)
	count := func() int { mu.Lock(); defer mu.Unlock(); return posts }

	if _, err := s.Send(context.Background(), 0, entries); StateOf(err) != RemoteUnauthorized {
		t.Fatalf("first send: %q (%v), want unauthorized", StateOf(err), err)
	}
	if c := count(); c < 8 {
		t.Fatalf("first send made %d posts, want one per lane (8)", c)
	}
	before := count()
	if _, err := s.Send(context.Background(), 0, entries); StateOf(err) != RemoteUnauthorized {
		t.Fatalf("throttled send: %q (%v), want unauthorized", StateOf(err), err)
	}
	if c := count() - before; c != 1 {
		t.Fatalf("a refused link sent %d requests, want a single probe", c)
	}
	mu.Lock()
	wrong = false
	mu.Unlock()
	if _, err := s.Send(context.Background(), 0, entries); err != nil {
		t.Fatalf("send after the fix: %v", err)
	}
	if got := len(ft.accepted()); got != len(entries) {
		t.Fatalf("target accepted %d records, want all %d", got, len(entries))
	}
}
