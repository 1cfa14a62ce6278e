package auth

import (
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"sync"
)

// successCache remembers credentials that recently passed bcrypt, so repeated requests skip it.
// An entry is keyed by username and a keyed SHA-256 of the password (HMAC with a per-process
// random key, so a memory dump does not hold plain SHA-256 password digests) and remembers the
// PasswordHash it was verified against; it only counts while that hash is still the stored one.
// At most max entries are kept, least recently used evicted first. max < 0 disables the cache.
type successCache struct {
	mu      sync.Mutex
	max     int
	secret  []byte
	order   *list.List // of *cacheEntry, most recent at the front
	entries map[credKey]*list.Element
}

type credKey struct {
	user string
	sum  [sha256.Size]byte
}

type cacheEntry struct {
	key  credKey
	hash string // the stored PasswordHash this password was verified against
}

func newSuccessCache(max int) *successCache {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails on supported platforms
	return &successCache{max: max, secret: secret, order: list.New(), entries: make(map[credKey]*list.Element)}
}

func (c *successCache) key(user, pw string) credKey {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(pw))
	k := credKey{user: user}
	copy(k.sum[:], m.Sum(nil))
	return k
}

// hit reports whether (user, pw) was verified against storedHash. An entry made for another
// hash is dropped.
func (c *successCache) hit(user, pw, storedHash string) bool {
	if c.max < 0 {
		return false
	}
	k := c.key(user, pw)
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return false
	}
	if el.Value.(*cacheEntry).hash != storedHash {
		c.order.Remove(el)
		delete(c.entries, k)
		return false
	}
	c.order.MoveToFront(el)
	return true
}

// put remembers that (user, pw) matched storedHash.
func (c *successCache) put(user, pw, storedHash string) {
	if c.max < 0 {
		return
	}
	k := c.key(user, pw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		el.Value.(*cacheEntry).hash = storedHash
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, hash: storedHash})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

// len returns the number of cached entries (tests).
func (c *successCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
