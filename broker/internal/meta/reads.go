package meta

import (
	"encoding/json"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Local reads of this replica's FSM. They never block Apply (pebble reads run concurrently
// with writes; only a snapshot Restore excludes them), may be stale on a lagging replica
// (see AppliedCaughtUp), and return copies the caller may modify. A storage or decode error
// is logged and reads as absent.

// getRecord reads and decodes one key; false when absent, closed or unreadable.
func (f *fsm) getRecord(key []byte, v any) bool {
	f.restoreMu.RLock()
	defer f.restoreMu.RUnlock()
	if f.closed {
		return false
	}
	raw, closer, err := f.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false
	}
	if err != nil {
		f.logger.Error("metastore read failed", "key", string(key), "err", err)
		return false
	}
	defer closer.Close()
	if err := json.Unmarshal(raw, v); err != nil {
		f.logger.Error("metastore record does not decode", "key", string(key), "err", err)
		return false
	}
	return true
}

// scanRecords calls fn with each raw value under [lower, upper) in key order until fn
// returns false.
func (f *fsm) scanRecords(lower, upper []byte, fn func(k, v []byte) bool) {
	f.restoreMu.RLock()
	defer f.restoreMu.RUnlock()
	if f.closed {
		return
	}
	it, err := f.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		f.logger.Error("metastore scan failed", "prefix", string(lower), "err", err)
		return
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key(), it.Value()) {
			return
		}
	}
	if err := it.Error(); err != nil {
		f.logger.Error("metastore scan failed", "prefix", string(lower), "err", err)
	}
}

// scanDecoded decodes every value under prefix into a new T; undecodable records are
// logged and skipped.
func scanDecoded[T any](f *fsm, lower, upper []byte, limit int) []T {
	out := []T{}
	f.scanRecords(lower, upper, func(k, v []byte) bool {
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			f.logger.Error("metastore record does not decode", "key", string(k), "err", err)
			return true
		}
		out = append(out, rec)
		return limit <= 0 || len(out) < limit
	})
	return out
}

func scanPrefix[T any](f *fsm, prefix []byte) []T {
	return scanDecoded[T](f, prefix, prefixEnd(prefix), 0)
}

// Topic returns the named topic.
func (s *Store) Topic(name string) (Topic, bool) { return s.fsm.topic(name) }

func (f *fsm) topic(name string) (Topic, bool) {
	var t Topic
	ok := f.getRecord(topicKey(name), &t)
	return t, ok
}

// Topics returns up to limit topics whose names sort after `after` (byte order, ascending);
// limit ≤ 0 means all. Never nil.
func (s *Store) Topics(after string, limit int) []Topic {
	lower := []byte(prefixTopic)
	if after != "" {
		lower = append(topicKey(after), 0)
	}
	return scanDecoded[Topic](s.fsm, lower, prefixEnd([]byte(prefixTopic)), limit)
}

// TopicCount returns the number of topics.
func (s *Store) TopicCount() int { return int(s.fsm.topicCount.Load()) }

// Assignments returns the topic's assignments in partition order (unassigned partitions are
// absent). Never nil.
func (s *Store) Assignments(topic string) []Assignment {
	return scanPrefix[Assignment](s.fsm, assignmentPrefix(topic))
}

// AllAssignments returns every assignment of every topic, ordered by topic then partition.
func (s *Store) AllAssignments() []Assignment {
	return scanPrefix[Assignment](s.fsm, []byte(prefixAssignment))
}

// Assignment returns one partition's assignment.
func (s *Store) Assignment(topic string, partition int) (Assignment, bool) {
	if partition < 0 {
		return Assignment{}, false
	}
	var a Assignment
	ok := s.fsm.getRecord(assignmentKey(topic, partition), &a)
	return a, ok
}

// Schemas returns the topic's schema history in version order. Never nil.
func (s *Store) Schemas(topic string) []Schema {
	return scanPrefix[Schema](s.fsm, schemaPrefix(topic))
}

// LatestSchema returns the topic's newest schema version.
func (s *Store) LatestSchema(topic string) (Schema, bool) {
	var out Schema
	found := false
	p := schemaPrefix(topic)
	s.fsm.restoreMu.RLock()
	defer s.fsm.restoreMu.RUnlock()
	if s.fsm.closed {
		return out, false
	}
	it, err := s.fsm.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return out, false
	}
	defer it.Close()
	if it.Last() {
		found = json.Unmarshal(it.Value(), &out) == nil
	}
	return out, found
}

// Member returns one member record.
func (s *Store) Member(id string) (Member, bool) {
	var m Member
	ok := s.fsm.getRecord(memberKey(id), &m)
	return m, ok
}

// Members returns every member record sorted by ID. Never nil.
func (s *Store) Members() []Member { return scanPrefix[Member](s.fsm, []byte(prefixMember)) }

// User returns one user (with its password hash: never send it to a client).
func (s *Store) User(name string) (User, bool) {
	var u User
	ok := s.fsm.getRecord(userKey(name), &u)
	return u, ok
}

// Users returns every user sorted by username. Never nil.
func (s *Store) Users() []User { return scanPrefix[User](s.fsm, []byte(prefixUser)) }

// RootSeeded reports whether SeedRootUser has ever seeded the root user.
func (s *Store) RootSeeded() bool {
	var seeded bool
	return s.fsm.getRecord(keyRootSeeded, &seeded) && seeded
}

// Domain versions (docs/internals/metastore.md §8). A cache keyed on one of these is valid while it is
// unchanged. Every value is drawn from one counter, so versions never repeat across domains.

// TopicVersion is the version of one topic record (max of its own bumps and the floor).
func (s *Store) TopicVersion(name string) uint64 { return s.fsm.versions.topic(name) }

// AssignmentsVersion is the version of one topic's assignments.
func (s *Store) AssignmentsVersion(topic string) uint64 { return s.fsm.versions.assignment(topic) }

// SchemasVersion is the version of one topic's schema history.
func (s *Store) SchemasVersion(topic string) uint64 { return s.fsm.versions.schema(topic) }

// UsersVersion is the version of the users domain (credential caches key on it).
func (s *Store) UsersVersion() uint64 { return s.fsm.versions.usersVersion() }

// MembersVersion is the routing-members version: member add/remove, address change,
// alive↔dead. Not heartbeat stamps, not drain flags.
func (s *Store) MembersVersion() uint64 { return s.fsm.versions.membersVersion() }

// LatestDomainVersion is the largest version drawn by any of the five domains; reconcilers
// skip their full pass while it is unchanged.
func (s *Store) LatestDomainVersion() uint64 { return s.fsm.versions.latest.Load() }

// MetadataVersion changes on every applied entry (heartbeats and drain flags included) and
// on open/restore: generic cache invalidation.
func (s *Store) MetadataVersion() uint64 { return s.fsm.versions.metadata.Load() }
