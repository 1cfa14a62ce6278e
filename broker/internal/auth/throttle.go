package auth

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// throttle keeps one failed-login token bucket per key (burst, one token regained per refill).
// A missing entry is a full bucket, so only failures create entries. The Authenticator keeps
// two: one keyed by client address, one by client address and username.
//
// The map never holds more than max entries after a failure is recorded: full buckets are
// dropped first, then the ones whose last failure is oldest.
type throttle struct {
	mu      sync.Mutex
	max     int
	burst   int
	refill  time.Duration
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time // time of the latest failure
}

func newThrottle(max, burst int, refill time.Duration) *throttle {
	return &throttle{max: max, burst: burst, refill: refill, buckets: make(map[string]*bucket)}
}

// empty reports whether key has no token left at now: every attempt is then refused.
func (t *throttle) empty(key string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	return b != nil && b.lim.TokensAt(now) < 1
}

// fail records a failed attempt for key at now. allowed is false when no token was left to
// take (a concurrent failure took the last one); emptied is true when the bucket is now empty.
func (t *throttle) fail(key string, now time.Time) (allowed, emptied bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Every(t.refill), t.burst)}
		t.buckets[key] = b
		if len(t.buckets) > t.max {
			t.prune(now, key)
		}
	}
	b.last = now
	allowed = b.lim.AllowN(now, 1)
	return allowed, b.lim.TokensAt(now) < 1
}

// prune drops full buckets, then the oldest, until the map is at most 7/8 of max. keep is never
// dropped. Called with mu held.
func (t *throttle) prune(now time.Time, keep string) {
	for key, b := range t.buckets {
		if key != keep && b.lim.TokensAt(now) >= float64(t.burst) {
			delete(t.buckets, key)
		}
	}
	target := t.max - t.max/8
	if len(t.buckets) <= target {
		return
	}
	type aged struct {
		key  string
		last time.Time
	}
	all := make([]aged, 0, len(t.buckets))
	for key, b := range t.buckets {
		if key != keep {
			all = append(all, aged{key, b.last})
		}
	}
	slices.SortFunc(all, func(x, y aged) int { return x.last.Compare(y.last) })
	for _, e := range all {
		if len(t.buckets) <= target {
			break
		}
		delete(t.buckets, e.key)
	}
}

// size returns the number of tracked keys (tests).
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.buckets)
}
