package auth

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// throttle keeps one failed-login token bucket per username (burst ThrottleBurst, one token per
// ThrottleRefill). A missing entry is a full bucket, so only failures create entries.
//
// The map never holds more than max entries after a failure is recorded: full buckets are
// dropped first, then the ones whose last failure is oldest.
type throttle struct {
	mu      sync.Mutex
	max     int
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time // time of the latest failure
}

func newThrottle(max int) *throttle {
	return &throttle{max: max, buckets: make(map[string]*bucket)}
}

// empty reports whether name has no token left at now: every attempt is then refused.
func (t *throttle) empty(name string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[name]
	return b != nil && b.lim.TokensAt(now) < 1
}

// fail records a failed attempt for name at now. allowed is false when no token was left to
// take (a concurrent failure took the last one); emptied is true when the bucket is now empty.
func (t *throttle) fail(name string, now time.Time) (allowed, emptied bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[name]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Every(ThrottleRefill), ThrottleBurst)}
		t.buckets[name] = b
		if len(t.buckets) > t.max {
			t.prune(now, name)
		}
	}
	b.last = now
	allowed = b.lim.AllowN(now, 1)
	return allowed, b.lim.TokensAt(now) < 1
}

// prune drops full buckets, then the oldest, until the map is at most 7/8 of max. keep is never
// dropped. Called with mu held.
func (t *throttle) prune(now time.Time, keep string) {
	for name, b := range t.buckets {
		if name != keep && b.lim.TokensAt(now) >= ThrottleBurst {
			delete(t.buckets, name)
		}
	}
	target := t.max - t.max/8
	if len(t.buckets) <= target {
		return
	}
	type aged struct {
		name string
		last time.Time
	}
	all := make([]aged, 0, len(t.buckets))
	for name, b := range t.buckets {
		if name != keep {
			all = append(all, aged{name, b.last})
		}
	}
	slices.SortFunc(all, func(x, y aged) int { return x.last.Compare(y.last) })
	for _, e := range all {
		if len(t.buckets) <= target {
			break
		}
		delete(t.buckets, e.name)
	}
}

// size returns the number of tracked usernames (tests).
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.buckets)
}
