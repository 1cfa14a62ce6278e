package schema

import (
	"container/list"
	"encoding/json"
	"sync"
)

// Key names one registered schema version of one topic incarnation. A deleted and re-created
// topic gets a new incarnation, so stale validators are never reused for it.
type Key struct {
	Topic       string
	Incarnation string
	Version     uint32
}

// DefaultCacheSize is the number of compiled validators a Cache keeps when given 0.
const DefaultCacheSize = 1024

// Cache holds compiled validators keyed by (topic, incarnation, version), least recently used
// evicted first. It never holds more than its capacity. Safe for concurrent use; a compile runs
// outside the lock, so two goroutines missing the same key may both compile (the last one stays).
type Cache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *cacheEntry, most recent first
	entries map[Key]*list.Element
}

type cacheEntry struct {
	key Key
	v   *Validator
}

// NewCache returns a Cache holding at most capacity validators (0 → DefaultCacheSize).
func NewCache(capacity int) *Cache {
	if capacity <= 0 {
		capacity = DefaultCacheSize
	}
	return &Cache{max: capacity, order: list.New(), entries: make(map[Key]*list.Element)}
}

// Lookup returns the cached validator for k.
func (c *Cache) Lookup(k Key) (*Validator, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).v, true
}

// Put stores v under k, evicting the least recently used entry when full.
func (c *Cache) Put(k Key, v *Validator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		el.Value.(*cacheEntry).v = v
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, v: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

// Validator returns the validator for k, calling load for the schema document and compiling
// it on a miss. load errors are returned as they are; compile errors wrap ErrInvalidSchema.
func (c *Cache) Validator(k Key, load func() (json.RawMessage, error)) (*Validator, error) {
	if v, ok := c.Lookup(k); ok {
		return v, nil
	}
	doc, err := load()
	if err != nil {
		return nil, err
	}
	v, err := compileStored(doc)
	if err != nil {
		return nil, err
	}
	c.Put(k, v)
	return v, nil
}

// Forget drops every cached version of topic (any incarnation), e.g. after a delete.
func (c *Cache) Forget(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.entries {
		if k.Topic == topic {
			c.order.Remove(el)
			delete(c.entries, k)
		}
	}
}

// Len returns the number of cached validators.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
