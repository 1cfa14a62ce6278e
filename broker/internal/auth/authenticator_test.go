package auth

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

type fakeSource struct {
	mu    sync.Mutex
	users map[string]meta.User
}

func (s *fakeSource) User(name string) (meta.User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[name]
	return u, ok
}

func (s *fakeSource) setPassword(t *testing.T, name, pw string) {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		s.users = map[string]meta.User{}
	}
	u := s.users[name]
	u.Username = name
	u.PasswordHash = string(h)
	s.users[name] = u
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// harness is an Authenticator with a fake clock and a bcrypt call counter.
type harness struct {
	a       *Authenticator
	src     *fakeSource
	clock   *fakeClock
	calls   atomic.Int64
	lastMu  sync.Mutex
	lastArg []byte
}

func newHarness(t *testing.T, opts AuthOptions) *harness {
	t.Helper()
	h := &harness{src: &fakeSource{}, clock: &fakeClock{t: time.Unix(1_700_000_000, 0)}}
	opts.Now = h.clock.Now
	if opts.DummyCost == 0 {
		opts.DummyCost = bcrypt.MinCost
	}
	h.a = NewAuthenticator(h.src, opts)
	h.a.compare = func(hash, pw []byte) error {
		h.calls.Add(1)
		h.lastMu.Lock()
		h.lastArg = append([]byte(nil), hash...)
		h.lastMu.Unlock()
		return bcrypt.CompareHashAndPassword(hash, pw)
	}
	return h
}

func (h *harness) try(user, pw string) (*meta.User, error) {
	return h.tryFrom("192.0.2.1:1234", user, pw)
}

// tryFrom authenticates as user from the TCP peer addr (host:port).
func (h *harness) tryFrom(addr, user, pw string) (*meta.User, error) {
	r := httptest.NewRequest(http.MethodGet, "/v1/topics", nil)
	r.RemoteAddr = addr
	r.SetBasicAuth(user, pw)
	return h.a.Authenticate(r)
}

func TestCorrectPasswordAuthenticates(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "s3cret")
	u, err := h.try("alice", "s3cret")
	if err != nil || u == nil || u.Username != "alice" {
		t.Fatalf("Authenticate = %v, %v; want alice", u, err)
	}
}

func TestUnknownUserIsIndistinguishableFromWrongPassword(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "s3cret")

	_, wrongErr := h.try("alice", "nope")
	if got := h.calls.Load(); got != 1 {
		t.Fatalf("wrong password ran %d bcrypt comparisons, want 1", got)
	}
	_, unknownErr := h.try("mallory", "nope")
	if got := h.calls.Load(); got != 2 {
		t.Fatalf("unknown user ran %d bcrypt comparisons, want 1 (same timing class)", got-1)
	}
	h.lastMu.Lock()
	usedDummy := bytes.Equal(h.lastArg, h.a.dummy)
	h.lastMu.Unlock()
	if !usedDummy {
		t.Fatal("unknown user was not compared against the dummy hash")
	}
	if !errors.Is(wrongErr, ErrUnauthenticated) || !errors.Is(unknownErr, ErrUnauthenticated) {
		t.Fatalf("errors = %v / %v, want ErrUnauthenticated for both", wrongErr, unknownErr)
	}
	if wrongErr.Error() != unknownErr.Error() {
		t.Fatalf("messages differ: %q vs %q", wrongErr, unknownErr)
	}
}

func TestDummyHashHasTheConfiguredCost(t *testing.T) {
	h := newHarness(t, AuthOptions{DummyCost: bcrypt.MinCost + 1})
	cost, err := bcrypt.Cost(h.a.dummy)
	if err != nil || cost != bcrypt.MinCost+1 {
		t.Fatalf("dummy hash cost = %d, %v; want %d", cost, err, bcrypt.MinCost+1)
	}
}

func TestMissingOrMalformedCredentialsAreUnauthenticated(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "s3cret")
	for _, hdr := range []string{"", "Bearer abc", "Basic !!!notbase64", "Basic " + "YWxpY2U=" /* "alice", no colon */} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if hdr != "" {
			r.Header.Set("Authorization", hdr)
		}
		if _, err := h.a.Authenticate(r); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("header %q: err = %v, want ErrUnauthenticated", hdr, err)
		}
	}
	if _, err := h.try("bad name", "x"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("invalid username: err = %v, want ErrUnauthenticated", err)
	}
}

func TestThrottleRefusesSixthFailureAndCorrectPasswordUntilRefill(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "s3cret")
	for i := 1; i <= ThrottleBurst; i++ {
		if _, err := h.try("alice", "wrong"); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("failure %d: err = %v, want ErrUnauthenticated", i, err)
		}
	}
	before := h.calls.Load()
	if _, err := h.try("alice", "wrong"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("6th bad attempt: err = %v, want ErrThrottled", err)
	}
	if _, err := h.try("alice", "s3cret"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("correct password on empty bucket: err = %v, want ErrThrottled", err)
	}
	if h.calls.Load() != before {
		t.Fatal("a throttled attempt ran bcrypt")
	}
	h.clock.Advance(ThrottleRefill - time.Millisecond)
	if _, err := h.try("alice", "s3cret"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("just before refill: err = %v, want ErrThrottled", err)
	}
	h.clock.Advance(time.Millisecond)
	if _, err := h.try("alice", "s3cret"); err != nil {
		t.Fatalf("after 12 s: err = %v, want success", err)
	}
	// A success takes no token: the regained one is still there for one failure.
	if _, err := h.try("alice", "wrong"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("failure after refill: err = %v, want ErrUnauthenticated", err)
	}
	if _, err := h.try("alice", "s3cret"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("bucket empty again: err = %v, want ErrThrottled", err)
	}
}

func TestThrottleIsPerUsernameAndCoversUnknownUsers(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "bob", "pw")
	for i := 0; i < ThrottleBurst; i++ {
		_, _ = h.try("ghost", "x")
	}
	if _, err := h.try("ghost", "x"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("unknown user after burst: err = %v, want ErrThrottled", err)
	}
	if _, err := h.try("bob", "pw"); err != nil {
		t.Fatalf("another username is throttled too: %v", err)
	}
}

func TestFailuresFromOneAddressNeverRefuseTheRightPasswordFromAnother(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "admin", "right")
	for i := 0; i < 3*ThrottleBurst; i++ {
		_, _ = h.tryFrom("203.0.113.7:4000", "admin", "guess")
	}
	if _, err := h.tryFrom("203.0.113.7:4001", "admin", "right"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("right password from the attacking address: err = %v, want ErrThrottled", err)
	}
	if _, err := h.tryFrom("198.51.100.2:5000", "admin", "right"); err != nil {
		t.Fatalf("right password from another address: err = %v, want success", err)
	}
	// The other address still has its own full budget of failures.
	for i := 1; i <= ThrottleBurst; i++ {
		if _, err := h.tryFrom("198.51.100.2:5000", "admin", "typo"); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("failure %d from the other address: err = %v, want ErrUnauthenticated", i, err)
		}
	}
}

func TestAddressIsThrottledAcrossUsernames(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "carol", "pw")
	// Spraying: a few failures for each of many usernames, never emptying a pair bucket.
	for i := 0; i < AddrThrottleBurst; i++ {
		if _, err := h.tryFrom("192.0.2.9:1", fmt.Sprintf("user%d", i/2), "x"); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("failure %d: err = %v, want ErrUnauthenticated", i+1, err)
		}
	}
	before := h.calls.Load()
	if _, err := h.tryFrom("192.0.2.9:2", "carol", "pw"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("any username from a throttled address: err = %v, want ErrThrottled", err)
	}
	if h.calls.Load() != before {
		t.Fatal("a throttled attempt ran bcrypt")
	}
	if _, err := h.tryFrom("192.0.2.10:1", "carol", "pw"); err != nil {
		t.Fatalf("the next address: err = %v, want success", err)
	}
	h.clock.Advance(AddrThrottleRefill)
	if _, err := h.tryFrom("192.0.2.9:2", "carol", "pw"); err != nil {
		t.Fatalf("after one address refill: err = %v, want success", err)
	}
}

func TestIPv6ClientsAreGroupedBySlash64(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "dave", "pw")
	for i := 0; i < ThrottleBurst; i++ {
		_, _ = h.tryFrom(fmt.Sprintf("[2001:db8:1:2::%x]:80", i+1), "dave", "x")
	}
	if _, err := h.tryFrom("[2001:db8:1:2:ffff::1]:80", "dave", "pw"); !errors.Is(err, ErrThrottled) {
		t.Fatalf("same /64: err = %v, want ErrThrottled", err)
	}
	if _, err := h.tryFrom("[2001:db8:1:3::1]:80", "dave", "pw"); err != nil {
		t.Fatalf("another /64: err = %v, want success", err)
	}
}

func TestForwardedForIsTrustedOnlyFromTrustedProxies(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8", "192.168.1.1"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy configured applies", "203.0.113.1:1", []string{"1.2.3.4"}, "203.0.113.1"},
		{"trusted proxy", "10.1.2.3:1", []string{"198.51.100.7"}, "198.51.100.7"},
		{"chain of trusted proxies", "10.1.2.3:1", []string{"6.6.6.6, 198.51.100.7, 192.168.1.1"}, "198.51.100.7"},
		{"two headers", "10.1.2.3:1", []string{"6.6.6.6", "198.51.100.7"}, "198.51.100.7"},
		{"junk stops at the last trusted hop", "10.1.2.3:1", []string{"198.51.100.7, junk, 10.9.9.9"}, "10.9.9.9"},
		{"trusted proxy without header", "10.1.2.3:1", nil, "10.1.2.3"},
		{"ipv4-mapped peer", "[::ffff:203.0.113.1]:1", nil, "203.0.113.1"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		tr := trusted
		if c.name == "no proxy configured applies" {
			tr = nil
		}
		if got := clientKey(r, tr); got != c.want {
			t.Errorf("%s: client = %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := ParseTrustedProxies([]string{"not-an-ip"}); err == nil {
		t.Error("a bad trusted proxy entry parsed")
	}
}

func TestThrottleMapStaysBounded(t *testing.T) {
	th := newThrottle(16, ThrottleBurst, ThrottleRefill)
	now := time.Unix(0, 0)
	for i := 0; i < 100; i++ {
		now = now.Add(time.Millisecond)
		th.fail(strings.Repeat("u", 1+i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), now)
		if th.size() > 16 {
			t.Fatalf("throttle map holds %d entries, bound 16", th.size())
		}
	}
	// The entry just recorded survives pruning.
	th.fail("newest", now)
	for i := 0; i < ThrottleBurst-1; i++ {
		th.fail("newest", now)
	}
	if !th.empty("newest", now) {
		t.Fatal("the newest bucket was pruned")
	}
}

func TestSuccessCacheSkipsBcryptForRepeatedCredentials(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "s3cret")
	for i := 0; i < 5; i++ {
		if _, err := h.try("alice", "s3cret"); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.calls.Load(); got != 1 {
		t.Fatalf("5 identical successes ran bcrypt %d times, want 1", got)
	}
	if _, err := h.try("alice", "S3cret"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a different password hit the cache: %v", err)
	}
}

func TestSuccessCacheInvalidatedWhenPasswordHashChanges(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "old")
	if _, err := h.try("alice", "old"); err != nil {
		t.Fatal(err)
	}
	h.src.setPassword(t, "alice", "new")
	if _, err := h.try("alice", "old"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("old password after change: err = %v, want ErrUnauthenticated", err)
	}
	if _, err := h.try("alice", "new"); err != nil {
		t.Fatalf("new password: %v", err)
	}
}

func TestSuccessCacheIsBounded(t *testing.T) {
	h := newHarness(t, AuthOptions{CacheSize: 2})
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		h.src.setPassword(t, n, "pw")
		if _, err := h.try(n, "pw"); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.a.cache.len(); got != 2 {
		t.Fatalf("cache holds %d entries, bound 2", got)
	}
	before := h.calls.Load()
	if _, err := h.try("a4", "pw"); err != nil || h.calls.Load() != before {
		t.Fatalf("most recent entry evicted (err %v)", err)
	}
	if _, err := h.try("a1", "pw"); err != nil || h.calls.Load() != before+1 {
		t.Fatalf("oldest entry not evicted (err %v)", err)
	}
}

func TestDeletedUserIsRefusedDespiteCache(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.setPassword(t, "alice", "pw")
	if _, err := h.try("alice", "pw"); err != nil {
		t.Fatal(err)
	}
	h.src.mu.Lock()
	delete(h.src.users, "alice")
	h.src.mu.Unlock()
	if _, err := h.try("alice", "pw"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("deleted user: err = %v, want ErrUnauthenticated", err)
	}
}

func TestOverlongPasswordNeverMatchesItsPrefix(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	pw := strings.Repeat("k", MaxPasswordLen)
	h.src.setPassword(t, "alice", pw)
	if _, err := h.try("alice", pw+"extra"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("73+ byte password sharing the 72-byte prefix: err = %v, want ErrUnauthenticated", err)
	}
	if h.calls.Load() != 1 {
		t.Fatalf("overlong password ran %d comparisons, want 1", h.calls.Load())
	}
}

func TestCorruptStoredHashIsUnavailableAndTakesNoToken(t *testing.T) {
	h := newHarness(t, AuthOptions{})
	h.src.users = map[string]meta.User{"alice": {Username: "alice", PasswordHash: "not-a-bcrypt-hash"}}
	for i := 0; i < ThrottleBurst+1; i++ {
		if _, err := h.try("alice", "pw"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("attempt %d: err = %v, want ErrUnavailable", i, err)
		}
	}
}

func TestNilSourceIsUnavailable(t *testing.T) {
	a := NewAuthenticator(nil, AuthOptions{DummyCost: bcrypt.MinCost})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth("alice", "pw")
	if _, err := a.Authenticate(r); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestConcurrentAuthenticationIsSafe(t *testing.T) {
	h := newHarness(t, AuthOptions{CacheSize: 4})
	for _, n := range []string{"u1", "u2", "u3"} {
		h.src.setPassword(t, n, "pw")
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				n := []string{"u1", "u2", "u3"}[(i+j)%3]
				if _, err := h.try(n, "pw"); err != nil {
					bad.Add(1)
				}
			}
		}(i)
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d concurrent correct logins failed", bad.Load())
	}
}

// FuzzAuthenticateHeader feeds arbitrary Authorization headers: never a panic, and every outcome
// is one of the documented sentinels.
func FuzzAuthenticateHeader(f *testing.F) {
	f.Add("Basic YWxpY2U6czNjcmV0") // alice:s3cret
	f.Add("Basic YWxpY2U6")
	f.Add("Basic Og==")
	f.Add("Basic !!")
	f.Add("basic YWxpY2U6czNjcmV0")
	f.Add("")
	src := &fakeSource{users: map[string]meta.User{}}
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	src.users["alice"] = meta.User{Username: "alice", PasswordHash: string(hash)}
	clock := &fakeClock{t: time.Unix(0, 0)}
	a := NewAuthenticator(src, AuthOptions{Now: clock.Now, DummyCost: bcrypt.MinCost})
	f.Fuzz(func(t *testing.T, hdr string) {
		clock.Advance(time.Minute) // keep buckets from staying empty across inputs
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", hdr)
		u, err := a.Authenticate(r)
		switch {
		case err == nil:
			if u == nil || u.Username != "alice" {
				t.Fatalf("success without the right user: %+v", u)
			}
		case errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrThrottled):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// FuzzClientKey feeds arbitrary peer addresses and X-Forwarded-For values through a trusted
// proxy: never a panic, and the key is "unknown", an IP address or an IPv6 /64, never text
// the client chose.
func FuzzClientKey(f *testing.F) {
	f.Add("10.0.0.1:80", "198.51.100.7")
	f.Add("10.0.0.1:80", "junk, 10.9.9.9")
	f.Add("[fe80::1%eth0]:1", "2001:db8::1, ::ffff:1.2.3.4")
	f.Add("garbage", "")
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8", "fe80::/10"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		key := clientKey(r, trusted)
		if key == "unknown" {
			return
		}
		if a, err := netip.ParseAddr(key); err == nil {
			if a.Is4In6() || a.Zone() != "" {
				t.Fatalf("key %q not normalised", key)
			}
			return
		}
		if p, err := netip.ParsePrefix(key); err != nil || p.Bits() != ipv6ThrottleBits || !p.Addr().Is6() {
			t.Fatalf("key %q is neither an address nor an IPv6 /64", key)
		}
	})
}
