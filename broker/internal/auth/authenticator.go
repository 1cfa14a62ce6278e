package auth

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

// UserSource reads users from the local metastore replica. It must be safe for concurrent use
// and must not block on the network (docs/internals/http-api.md §1.2: any node authenticates locally).
type UserSource interface {
	User(name string) (meta.User, bool)
}

// AuthOptions tunes an Authenticator. The zero value is usable.
type AuthOptions struct {
	// Now is the clock of the failed-login throttle; nil → time.Now.
	Now func() time.Time
	// Logger receives failed-login and throttle events (keys: user, client); nil → discard.
	Logger *slog.Logger
	// TrustedProxies are the peers whose X-Forwarded-For header names the client address the
	// throttle keys on (docs/operating.md, Security); empty → the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// CacheSize bounds the success cache (entries); 0 → DefaultCacheSize, < 0 disables it.
	CacheSize int
	// DummyCost is the bcrypt cost of the hash compared for unknown users, so that an unknown
	// user costs the same as a wrong password. It should equal the cost stored hashes are made
	// with; 0 → DefaultBcryptCost.
	DummyCost int
}

// Throttle and cache limits (docs/operating.md, Security). Both buckets regain a token within
// ThrottleRefill, so a 429's Retry-After of 12 s holds for either.
const (
	ThrottleBurst  = 5                // failed attempts allowed back to back per client address and username
	ThrottleRefill = 12 * time.Second // one such attempt regained per interval
	// AddrThrottleBurst failed attempts are allowed back to back per client address, whatever
	// the usernames (password spraying); one is regained every AddrThrottleRefill.
	AddrThrottleBurst  = 30
	AddrThrottleRefill = 2 * time.Second
	DefaultCacheSize   = 4096 // successful credentials remembered (LRU)
	// maxThrottleEntries bounds each bucket map; full buckets are dropped first.
	maxThrottleEntries = 65536
)

// Authenticator checks HTTP Basic credentials against bcrypt hashes from a UserSource.
//
// Invariants: an unknown user and a wrong password return the same error after the same work
// (one bcrypt comparison at the same cost); failures are counted per client address and per
// client address and username, never per username alone, so failures from one address never
// refuse a correct password from another; once a bucket is empty every attempt it covers is
// refused with ErrThrottled without a bcrypt comparison, a correct password included, and
// only failures take tokens; a cached success is honoured only while the user's stored
// PasswordHash is the one it was verified against, so a password change takes effect on the
// next request.
//
// Authenticate is safe for concurrent use.
type Authenticator struct {
	src     UserSource
	now     func() time.Time
	log     *slog.Logger
	dummy   []byte
	trusted []netip.Prefix
	byAddr  *throttle // key: client address
	byPair  *throttle // key: client address + "/" + username
	cache   *successCache
	// compare is bcrypt.CompareHashAndPassword; tests swap it to count calls.
	compare func(hash, pw []byte) error
}

// NewAuthenticator returns an Authenticator reading users from src.
func NewAuthenticator(src UserSource, opts AuthOptions) *Authenticator {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	size := opts.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	cost := opts.DummyCost
	if cost <= 0 {
		cost = DefaultBcryptCost
	}
	return &Authenticator{
		src:     src,
		now:     now,
		log:     log,
		dummy:   dummyHash(cost),
		trusted: opts.TrustedProxies,
		byAddr:  newThrottle(maxThrottleEntries, AddrThrottleBurst, AddrThrottleRefill),
		byPair:  newThrottle(maxThrottleEntries, ThrottleBurst, ThrottleRefill),
		cache:   newSuccessCache(size),
		compare: bcrypt.CompareHashAndPassword,
	}
}

// Authenticate returns the user whose HTTP Basic credentials r carries. Errors wrap
// ErrUnauthenticated (401: missing/malformed header, unknown user, wrong password),
// ErrThrottled (429) or ErrUnavailable (500: no source, corrupt stored hash).
func (a *Authenticator) Authenticate(r *http.Request) (*meta.User, error) {
	name, pw, ok := r.BasicAuth()
	if !ok {
		return nil, fmt.Errorf("%w: missing or malformed basic credentials", ErrUnauthenticated)
	}
	if a.src == nil {
		return nil, fmt.Errorf("%w: no user source", ErrUnavailable)
	}
	if ValidateUsername(name) != nil {
		// No account can carry this name, so there is nothing to hide or to throttle, and
		// arbitrary junk never enters the throttle map.
		return nil, fmt.Errorf("%w: invalid credentials", ErrUnauthenticated)
	}
	now := a.now()
	client := clientKey(r, a.trusted)
	pair := client + "/" + name // unambiguous: usernames never hold a "/"
	if a.byAddr.empty(client, now) || a.byPair.empty(pair, now) {
		return nil, fmt.Errorf("%w: user %q from %s", ErrThrottled, name, client)
	}
	u, found := a.src.User(name)
	if found && a.cache.hit(name, pw, u.PasswordHash) {
		return &u, nil
	}
	match, err := a.verify(found, u.PasswordHash, pw)
	if err != nil {
		a.log.Error("stored password hash unusable", "user", name, "err", err)
		return nil, fmt.Errorf("%w: stored credentials of %q unusable", ErrUnavailable, name)
	}
	if match {
		a.cache.put(name, pw, u.PasswordHash)
		return &u, nil
	}
	addrOK, addrEmptied := a.byAddr.fail(client, now)
	pairOK, pairEmptied := a.byPair.fail(pair, now)
	a.log.Debug("authentication failed", "user", name, "client", client)
	switch {
	case addrEmptied:
		a.log.Warn("failed-login throttle engaged for a client address", "client", client)
	case pairEmptied:
		a.log.Warn("failed-login throttle engaged", "user", name, "client", client)
	}
	if !addrOK || !pairOK {
		return nil, fmt.Errorf("%w: user %q from %s", ErrThrottled, name, client)
	}
	return nil, fmt.Errorf("%w: invalid credentials", ErrUnauthenticated)
}

// verify runs exactly one bcrypt comparison: against the user's hash when the user exists and
// the password is of a storable length, else against the dummy hash (whose result is ignored).
// bcrypt silently truncates keys past 72 bytes, so longer passwords never match.
func (a *Authenticator) verify(found bool, hash, pw string) (bool, error) {
	if !found || pw == "" || len(pw) > MaxPasswordLen {
		_ = a.compare(a.dummy, []byte(pw[:min(len(pw), MaxPasswordLen)]))
		return false, nil
	}
	err := a.compare([]byte(hash), []byte(pw))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return false, nil
	default:
		return false, err
	}
}

// dummyHashes holds one hash per bcrypt cost, made once per process.
var dummyHashes sync.Map // int → func() []byte

// dummyHash returns a bcrypt hash at cost of a password nobody knows.
func dummyHash(cost int) []byte {
	f, _ := dummyHashes.LoadOrStore(cost, sync.OnceValue(func() []byte {
		h, err := bcrypt.GenerateFromPassword([]byte("narad-dummy-password-never-stored"), cost)
		if err != nil {
			// Only an out-of-range cost fails; fall back to the default cost.
			h, _ = bcrypt.GenerateFromPassword([]byte("narad-dummy-password-never-stored"), DefaultBcryptCost)
		}
		return h
	}))
	return f.(func() []byte)()
}
