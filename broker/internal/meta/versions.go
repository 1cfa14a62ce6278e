package meta

import (
	"sync"
	"sync/atomic"
)

// domainVersions are the in-memory per-domain version counters (docs/internals/metastore.md §8).
//
// Invariant: every bump draws from one shared counter, so a new version is larger than every
// earlier version of any domain, and a key's effective version max(key, floor) never goes
// backwards. Heartbeat stamps and drain flags never bump a domain. Opening the FSM and
// restoring a snapshot bump every domain (bumpAll).
type domainVersions struct {
	counter  atomic.Uint64 // shared source of every domain version
	latest   atomic.Uint64 // largest value drawn by any domain (LatestDomainVersion)
	metadata atomic.Uint64 // bumped by every applied entry and by bumpAll

	mu               sync.RWMutex
	topics           map[string]uint64
	assignments      map[string]uint64
	schemas          map[string]uint64
	topicsFloor      uint64
	assignmentsFloor uint64
	schemasFloor     uint64
	users, members   uint64
}

func newDomainVersions() *domainVersions {
	v := &domainVersions{}
	v.bumpAll()
	return v
}

// draw returns the next shared version; callers hold mu.
func (v *domainVersions) draw() uint64 {
	n := v.counter.Add(1)
	v.latest.Store(n)
	return n
}

// bumpAll raises every domain (floors included) above every earlier version. The per-key
// maps are dropped: every key's effective version is now its floor.
func (v *domainVersions) bumpAll() {
	v.mu.Lock()
	v.topics = map[string]uint64{}
	v.assignments = map[string]uint64{}
	v.schemas = map[string]uint64{}
	v.topicsFloor = v.draw()
	v.assignmentsFloor = v.draw()
	v.schemasFloor = v.draw()
	v.users = v.draw()
	v.members = v.draw()
	v.mu.Unlock()
	v.metadata.Add(1)
}

// apply bumps the domains an applied entry touched.
func (v *domainVersions) apply(c *changes) {
	v.metadata.Add(1)
	if !c.anyDomain() {
		return
	}
	v.mu.Lock()
	for t := range c.topics {
		v.topics[t] = v.draw()
	}
	for t := range c.assignments {
		v.assignments[t] = v.draw()
	}
	for t := range c.schemas {
		v.schemas[t] = v.draw()
	}
	if c.users {
		v.users = v.draw()
	}
	if c.members {
		v.members = v.draw()
	}
	v.mu.Unlock()
}

func (v *domainVersions) keyVersion(m map[string]uint64, floor uint64, key string) uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return max(m[key], floor)
}

func (v *domainVersions) topic(name string) uint64 {
	return v.keyVersion(v.topics, v.topicsFloor, name)
}

func (v *domainVersions) assignment(topic string) uint64 {
	return v.keyVersion(v.assignments, v.assignmentsFloor, topic)
}

func (v *domainVersions) schema(topic string) uint64 {
	return v.keyVersion(v.schemas, v.schemasFloor, topic)
}

func (v *domainVersions) usersVersion() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.users
}

func (v *domainVersions) membersVersion() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.members
}

// changes records what one applied entry touched; it drives version bumps and events.
type changes struct {
	topics      map[string]struct{}
	assignments map[string]struct{}
	schemas     map[string]struct{}
	users       bool
	members     bool
	wrote       bool // any domain key written (drain flags and heartbeats included)
}

func newChanges() *changes {
	return &changes{
		topics:      map[string]struct{}{},
		assignments: map[string]struct{}{},
		schemas:     map[string]struct{}{},
	}
}

func (c *changes) anyDomain() bool {
	return len(c.topics)+len(c.assignments)+len(c.schemas) > 0 || c.users || c.members
}
