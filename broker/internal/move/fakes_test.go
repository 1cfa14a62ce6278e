package move

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// ---- clock ----

// fakeClock is a manual clock for the 15-s, 2-min and age rules. It starts at the real time
// and moves only when advanced (readings keep a monotonic component).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// ---- logs ----

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

// logRecorder is a slog handler that keeps every record for assertions.
type logRecorder struct {
	mu   *sync.Mutex
	recs *[]logRecord
	with []slog.Attr
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: &sync.Mutex{}, recs: &[]logRecord{}}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	for _, a := range h.with {
		rec.attrs[a.Key] = a.Value.Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Any()
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{mu: h.mu, recs: h.recs, with: append(append([]slog.Attr{}, h.with...), as...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the records whose message is msg.
func (h *logRecorder) find(msg string) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range *h.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

func (h *logRecorder) count(msg string) int { return len(h.find(msg)) }

func (h *logRecorder) dump() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range *h.recs {
		fmt.Fprintf(&b, "%s %s %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}

// ---- store ----

type pkey struct {
	topic string
	p     int
}

// fakeStore is the metastore as the runner sees it: the local replica's reads, the flip CAS
// with the FSM's semantics (op 16), and a leader read, each with injectable failures.
type fakeStore struct {
	mu       sync.Mutex
	self     string
	topics   map[string]meta.Topic
	asg      map[pkey]meta.Assignment
	members  map[string]meta.Member
	version  atomic.Uint64
	caughtUp atomic.Bool

	// completeFn, if set, replaces CompleteMove; apply runs the real CAS.
	completeFn func(n int64, apply func() (meta.CASResult, meta.Assignment, error)) (meta.CASResult, meta.Assignment, error)
	// confirmErr, if set and non-nil for call n, fails ConfirmAssignment (unconfirmed).
	confirmErr func(n int64) error
	// onFlip runs after a flip applied (the source loses ownership).
	onFlip func()

	completes, confirms atomic.Int64
}

func newFakeStore(self string) *fakeStore {
	s := &fakeStore{self: self, topics: map[string]meta.Topic{}, asg: map[pkey]meta.Assignment{}, members: map[string]meta.Member{}}
	s.caughtUp.Store(true)
	return s
}

func (s *fakeStore) bump() { s.version.Add(1) }

func (s *fakeStore) putTopic(t meta.Topic) {
	s.mu.Lock()
	s.topics[t.Name] = t
	s.mu.Unlock()
	s.bump()
}

func (s *fakeStore) putAssignment(a meta.Assignment) {
	s.mu.Lock()
	s.asg[pkey{a.Topic, a.Partition}] = a
	s.mu.Unlock()
	s.bump()
}

func (s *fakeStore) putMember(m meta.Member) {
	s.mu.Lock()
	s.members[m.ID] = m
	s.mu.Unlock()
	s.bump()
}

func (s *fakeStore) NodeID() string              { return s.self }
func (s *fakeStore) AppliedCaughtUp() bool       { return s.caughtUp.Load() }
func (s *fakeStore) LatestDomainVersion() uint64 { return s.version.Load() }

func (s *fakeStore) Topics(after string, limit int) []meta.Topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.topics {
		if n > after {
			names = append(names, n)
		}
	}
	sortStrings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]meta.Topic, 0, len(names))
	for _, n := range names {
		out = append(out, s.topics[n])
	}
	return out
}

func (s *fakeStore) Topic(name string) (meta.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	return t, ok
}

func (s *fakeStore) Assignments(topic string) []meta.Assignment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []meta.Assignment
	for k, a := range s.asg {
		if k.topic == topic {
			out = append(out, a)
		}
	}
	return out
}

func (s *fakeStore) Assignment(topic string, p int) (meta.Assignment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.asg[pkey{topic, p}]
	return a, ok
}

func (s *fakeStore) Member(id string) (meta.Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[id]
	return m, ok
}

// applyComplete is op 16's FSM rule.
func (s *fakeStore) applyComplete(topic string, p int, expectedOwner, target string) (meta.CASResult, meta.Assignment, error) {
	s.mu.Lock()
	k := pkey{topic, p}
	a, ok := s.asg[k]
	switch {
	case !ok:
		s.mu.Unlock()
		return meta.CASNotFound, meta.Assignment{}, meta.ErrNotFound
	case a.Owner == target && a.Target == "":
		s.mu.Unlock()
		return meta.CASAlreadyDone, a, nil
	case a.Owner == expectedOwner && a.Target == target:
		a.Owner, a.Target = target, ""
		s.asg[k] = a
		s.mu.Unlock()
		s.bump()
		if s.onFlip != nil {
			s.onFlip()
		}
		return meta.CASDone, a, nil
	}
	s.mu.Unlock()
	return meta.CASRefused, a, meta.ErrConflict
}

func (s *fakeStore) CompleteMove(ctx context.Context, topic string, p int, expectedOwner, target string) (meta.CASResult, meta.Assignment, error) {
	n := s.completes.Add(1)
	apply := func() (meta.CASResult, meta.Assignment, error) {
		return s.applyComplete(topic, p, expectedOwner, target)
	}
	if s.completeFn != nil {
		return s.completeFn(n, apply)
	}
	return apply()
}

func (s *fakeStore) ConfirmAssignment(ctx context.Context, topic string, p int) (meta.Assignment, bool, error) {
	n := s.confirms.Add(1)
	if s.confirmErr != nil {
		if err := s.confirmErr(n); err != nil {
			return meta.Assignment{}, false, fmt.Errorf("%w: %w", meta.ErrUnconfirmed, err)
		}
	}
	a, ok := s.Assignment(topic, p)
	return a, ok, nil
}

var _ Store = (*fakeStore)(nil)

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// ---- local engine ----

// fakeLocal is a minimal real transfer.Local over a temp data dir: renames with the
// incarnation and marker checks of docs/internals/moves.md §5.9, §7.
type fakeLocal struct {
	root       string
	mu         sync.Mutex
	prepareErr error
	installErr error

	prepares, installs, renameBacks, drops atomic.Int64
}

func newFakeLocal(t *testing.T) *fakeLocal { return &fakeLocal{root: t.TempDir()} }

func (l *fakeLocal) PartitionDir(topic string, p int) string {
	return datadir.New(l.root).PartitionDir(topic, p)
}

func (l *fakeLocal) StagingDir(topic string, p int) string {
	return datadir.New(l.root).StagingDir(topic, p)
}

func (l *fakeLocal) incPath(topic string) string {
	return filepath.Join(l.root, "topics", topic, ".incarnation")
}

func (l *fakeLocal) PrepareTopicDir(topic, incarnation string) error {
	l.prepares.Add(1)
	l.mu.Lock()
	err := l.prepareErr
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if err := durable.MkdirAll(filepath.Dir(l.incPath(topic))); err != nil {
		return err
	}
	if _, err := os.Stat(l.incPath(topic)); errors.Is(err, os.ErrNotExist) {
		return durable.WriteFileAtomic(l.incPath(topic), []byte(incarnation+"\n"))
	}
	return nil
}

func (l *fakeLocal) checkInc(topic, incarnation string) error {
	b, err := os.ReadFile(l.incPath(topic))
	if err != nil || strings.TrimSpace(string(b)) != incarnation {
		return transfer.ErrIncarnationChanged
	}
	return nil
}

func (l *fakeLocal) Install(topic string, p int, incarnation, staging string) error {
	l.mu.Lock()
	err := l.installErr
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if err := l.checkInc(topic, incarnation); err != nil {
		return err
	}
	path := l.PartitionDir(topic, p)
	if _, err := os.Stat(path); err == nil {
		if err := os.Rename(path, path+".quarantine"); err != nil {
			return err
		}
	}
	l.DropConsumerState(topic, p)
	if err := os.Rename(staging, path); err != nil {
		return err
	}
	l.DropConsumerState(topic, p)
	l.installs.Add(1)
	return durable.SyncDir(filepath.Dir(path))
}

func (l *fakeLocal) RenameBack(topic string, p int, incarnation, staging string, marker []byte) error {
	if err := l.checkInc(topic, incarnation); err != nil {
		return transfer.ErrNotInstalled
	}
	path := l.PartitionDir(topic, p)
	raw, err := transfer.ReadMarkerRaw(path)
	if err != nil || !bytes.Equal(raw, marker) {
		return transfer.ErrNotInstalled
	}
	if err := os.Rename(path, staging); err != nil {
		return err
	}
	l.renameBacks.Add(1)
	return nil
}

func (l *fakeLocal) DropConsumerState(topic string, p int) { l.drops.Add(1) }

var _ transfer.Local = (*fakeLocal)(nil)
