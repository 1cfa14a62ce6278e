package engine

import (
	"sync"

	"narad.dev/broker/internal/meta"
)

// metaView caches decoded metastore reads for the hot paths (every produce, consume, ack and
// dispatched batch reads its topic and assignments; authentication reads the user). Invariant:
// an entry is served only while the metastore's MetadataVersion equals the version read
// *before* the entry was loaded, so a concurrent apply can only make an entry look stale,
// never make a stale entry look current.
type metaView struct {
	store *meta.Store

	mu      sync.RWMutex
	version uint64
	topics  map[string]found[meta.Topic]
	assigns map[string][]meta.Assignment
	members map[string]found[meta.Member]
	users   map[string]found[meta.User]
}

// found is a cached (value, present) read.
type found[T any] struct {
	v  T
	ok bool
}

func newMetaView(store *meta.Store) *metaView {
	v := &metaView{store: store}
	v.reset(0)
	return v
}

func (v *metaView) reset(version uint64) {
	v.version = version
	v.topics = map[string]found[meta.Topic]{}
	v.assigns = map[string][]meta.Assignment{}
	v.members = map[string]found[meta.Member]{}
	v.users = map[string]found[meta.User]{}
}

// current returns the version to load under, dropping every entry if it moved.
func (v *metaView) current() uint64 {
	ver := v.store.MetadataVersion()
	v.mu.RLock()
	same := v.version == ver
	v.mu.RUnlock()
	if !same {
		v.mu.Lock()
		if v.version != ver {
			v.reset(ver)
		}
		v.mu.Unlock()
	}
	return ver
}

// cachedRead serves key from the map m selects, loading it with read on a miss. The entry is
// stored only if the version did not move since before the load (the view's invariant).
func cachedRead[V any](v *metaView, m func(*metaView) map[string]V, key string, read func() V) V {
	ver := v.current()
	v.mu.RLock()
	e, hit := m(v)[key]
	v.mu.RUnlock()
	if hit {
		return e
	}
	e = read()
	v.mu.Lock()
	if v.version == ver {
		m(v)[key] = e
	}
	v.mu.Unlock()
	return e
}

// Topic reads one topic.
func (v *metaView) Topic(name string) (meta.Topic, bool) {
	f := cachedRead(v, func(v *metaView) map[string]found[meta.Topic] { return v.topics }, name,
		func() found[meta.Topic] { t, ok := v.store.Topic(name); return found[meta.Topic]{t, ok} })
	return f.v, f.ok
}

// Assignments reads a topic's assignments (ordered by partition). Callers must not modify
// the returned slice.
func (v *metaView) Assignments(topic string) []meta.Assignment {
	return cachedRead(v, func(v *metaView) map[string][]meta.Assignment { return v.assigns }, topic,
		func() []meta.Assignment { return v.store.Assignments(topic) })
}

// Assignment reads one partition's assignment.
func (v *metaView) Assignment(topic string, p int) (meta.Assignment, bool) {
	for _, a := range v.Assignments(topic) {
		if a.Partition == p {
			return a, true
		}
	}
	return meta.Assignment{}, false
}

// Member reads one member record.
func (v *metaView) Member(id string) (meta.Member, bool) {
	f := cachedRead(v, func(v *metaView) map[string]found[meta.Member] { return v.members }, id,
		func() found[meta.Member] { m, ok := v.store.Member(id); return found[meta.Member]{m, ok} })
	return f.v, f.ok
}

// User reads one user record (authentication runs this on every request).
func (v *metaView) User(name string) (meta.User, bool) {
	f := cachedRead(v, func(v *metaView) map[string]found[meta.User] { return v.users }, name,
		func() found[meta.User] { u, ok := v.store.User(name); return found[meta.User]{u, ok} })
	return f.v, f.ok
}
