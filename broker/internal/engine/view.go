package engine

import (
	"sync"

	"narad.dev/broker/internal/meta"
)

// metaView caches decoded metastore reads for the hot paths (every produce, consume, ack and
// dispatched batch reads its topic and assignments). Invariant: an entry is served only while
// the metastore's MetadataVersion equals the version read *before* the entry was loaded, so a
// concurrent apply can only make an entry look stale, never make a stale entry look current.
type metaView struct {
	store *meta.Store

	mu      sync.RWMutex
	version uint64
	topics  map[string]topicEntry
	assigns map[string][]meta.Assignment
	members map[string]memberEntry
	users   map[string]userEntry
}

type userEntry struct {
	u  meta.User
	ok bool
}

type topicEntry struct {
	t  meta.Topic
	ok bool
}

type memberEntry struct {
	m  meta.Member
	ok bool
}

func newMetaView(store *meta.Store) *metaView {
	v := &metaView{store: store}
	v.reset(0)
	return v
}

func (v *metaView) reset(version uint64) {
	v.version = version
	v.topics = map[string]topicEntry{}
	v.assigns = map[string][]meta.Assignment{}
	v.members = map[string]memberEntry{}
	v.users = map[string]userEntry{}
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

// Topic reads one topic.
func (v *metaView) Topic(name string) (meta.Topic, bool) {
	ver := v.current()
	v.mu.RLock()
	e, hit := v.topics[name]
	v.mu.RUnlock()
	if hit {
		return e.t, e.ok
	}
	t, ok := v.store.Topic(name)
	v.mu.Lock()
	if v.version == ver {
		v.topics[name] = topicEntry{t, ok}
	}
	v.mu.Unlock()
	return t, ok
}

// Assignments reads a topic's assignments (ordered by partition). Callers must not modify
// the returned slice.
func (v *metaView) Assignments(topic string) []meta.Assignment {
	ver := v.current()
	v.mu.RLock()
	as, hit := v.assigns[topic]
	v.mu.RUnlock()
	if hit {
		return as
	}
	as = v.store.Assignments(topic)
	v.mu.Lock()
	if v.version == ver {
		v.assigns[topic] = as
	}
	v.mu.Unlock()
	return as
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
	ver := v.current()
	v.mu.RLock()
	e, hit := v.members[id]
	v.mu.RUnlock()
	if hit {
		return e.m, e.ok
	}
	m, ok := v.store.Member(id)
	v.mu.Lock()
	if v.version == ver {
		v.members[id] = memberEntry{m, ok}
	}
	v.mu.Unlock()
	return m, ok
}

// User reads one user record (authentication runs this on every request).
func (v *metaView) User(name string) (meta.User, bool) {
	ver := v.current()
	v.mu.RLock()
	e, hit := v.users[name]
	v.mu.RUnlock()
	if hit {
		return e.u, e.ok
	}
	u, ok := v.store.User(name)
	v.mu.Lock()
	if v.version == ver {
		v.users[name] = userEntry{u, ok}
	}
	v.mu.Unlock()
	return u, ok
}
