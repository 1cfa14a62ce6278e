package api

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// fakeBackend is an in-memory Backend. Hooks, when set, replace the default behaviour;
// calls records which methods ran, so check-order tests can prove a later step was never
// reached.
type fakeBackend struct {
	mu       sync.Mutex
	topics   map[string]meta.Topic
	schemas  map[string]json.RawMessage
	users    map[string]meta.User
	calls    []string
	produced [][]service.ProduceRecord
	created  []service.CreateTopicRequest
	altered  []service.AlterTopicRequest
	consumed []service.ConsumeRequest
	released [][]service.Message // ReleaseAnswer's arguments
	requeued [][]service.Message // Requeue's arguments
	acked    [][]service.AckEntry
	ready    error
	shutting bool

	createErr   error
	alterErr    error
	produceErr  error
	produceGate func() // when set, Produce calls it first (outside the lock): a test holds a request in flight
	validate    func(t meta.Topic, payload []byte) error
	consumeFn   func(t meta.Topic, req service.ConsumeRequest) ([]service.Message, error)
	ackFn       func(entries []service.AckEntry) []error
	panicOnRead bool
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		topics:  map[string]meta.Topic{},
		schemas: map[string]json.RawMessage{},
		users:   map[string]meta.User{},
	}
}

func (f *fakeBackend) record(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

func (f *fakeBackend) called(call string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if c == call {
			return true
		}
	}
	return false
}

func (f *fakeBackend) addTopic(t meta.Topic) {
	if t.Partitions == 0 {
		t.Partitions = 3
	}
	if t.Role == "" {
		t.Role = meta.RoleStandalone
	}
	f.mu.Lock()
	f.topics[t.Name] = t
	f.mu.Unlock()
}

func (f *fakeBackend) CreateTopic(_ context.Context, req service.CreateTopicRequest) (meta.Topic, error) {
	f.record("CreateTopic")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, req)
	if f.createErr != nil {
		return meta.Topic{}, f.createErr
	}
	if _, ok := f.topics[req.Name]; ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", req.Name, ErrExists)
	}
	t := meta.Topic{Name: req.Name, Partitions: req.Partitions, Owner: req.Owner,
		Role: meta.RoleStandalone, RetentionMs: meta.DefaultRetentionMs, CreatedAt: 1700000000}
	if t.Partitions == 0 {
		t.Partitions = meta.DefaultPartitions
	}
	if req.RetentionMs != nil {
		t.RetentionMs = *req.RetentionMs
	}
	f.topics[t.Name] = t
	return t, nil
}

func (f *fakeBackend) ListTopics(after string, limit int) ([]meta.Topic, string) {
	f.record("ListTopics")
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.topics {
		if n > after {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	out := make([]meta.Topic, 0, len(names))
	for _, n := range names {
		out = append(out, f.topics[n])
	}
	return out, next
}

func (f *fakeBackend) Topic(name string) (meta.Topic, bool) {
	f.record("Topic")
	if f.panicOnRead {
		panic("fake backend: boom")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[name]
	return t, ok
}

func (f *fakeBackend) PartitionStats(_ context.Context, t meta.Topic, partition int) []service.PartitionStats {
	f.record("PartitionStats")
	var out []service.PartitionStats
	for p := t.Partitions - 1; p >= 0; p-- { // reverse, so the handler's sort is exercised
		if partition >= 0 && p != partition {
			continue
		}
		out = append(out, service.PartitionStats{Index: p, OwnerNode: "n1", Available: true})
	}
	return out
}

func (f *fakeBackend) AlterTopic(_ context.Context, name string, req service.AlterTopicRequest) (meta.Topic, error) {
	f.record("AlterTopic")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.altered = append(f.altered, req)
	if f.alterErr != nil {
		return meta.Topic{}, f.alterErr
	}
	t := f.topics[name]
	if req.Partitions != 0 {
		t.Partitions = req.Partitions
	}
	if req.RetentionMs != nil {
		t.RetentionMs = *req.RetentionMs
	}
	f.topics[name] = t
	return t, nil
}

func (f *fakeBackend) DeleteTopic(_ context.Context, name string) error {
	f.record("DeleteTopic")
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.topics, name)
	return nil
}

func (f *fakeBackend) ValidatePayload(t meta.Topic, payload []byte) error {
	f.record("ValidatePayload")
	if f.validate != nil {
		return f.validate(t, payload)
	}
	return nil
}

func (f *fakeBackend) Schema(topic string) (json.RawMessage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.schemas[topic]
	return d, ok
}

func (f *fakeBackend) Produce(_ context.Context, _ meta.Topic, recs []service.ProduceRecord) error {
	f.record("Produce")
	if f.produceGate != nil {
		f.produceGate()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.produceErr != nil {
		return f.produceErr
	}
	f.produced = append(f.produced, recs)
	return nil
}

func (f *fakeBackend) Consume(_ context.Context, t meta.Topic, req service.ConsumeRequest) ([]service.Message, error) {
	f.record("Consume")
	f.mu.Lock()
	f.consumed = append(f.consumed, req)
	fn := f.consumeFn
	f.mu.Unlock()
	if fn != nil {
		return fn(t, req)
	}
	return nil, nil
}

func (f *fakeBackend) Requeue(_ meta.Topic, msgs []service.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requeued = append(f.requeued, msgs)
}

func (f *fakeBackend) ReleaseAnswer(msgs []service.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, msgs)
}

func (f *fakeBackend) Ack(_ context.Context, _ meta.Topic, entries []service.AckEntry) []error {
	f.record("Ack")
	f.mu.Lock()
	f.acked = append(f.acked, entries)
	fn := f.ackFn
	f.mu.Unlock()
	if fn != nil {
		return fn(entries)
	}
	return make([]error, len(entries))
}

func (f *fakeBackend) CreateUser(_ context.Context, u meta.User) error {
	f.record("CreateUser")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.users[u.Username]; ok {
		return fmt.Errorf("user %q: %w", u.Username, ErrExists)
	}
	f.users[u.Username] = u
	return nil
}

func (f *fakeBackend) User(name string) (meta.User, bool) {
	f.record("User")
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[name]
	return u, ok
}

func (f *fakeBackend) Users() []meta.User {
	f.record("Users")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []meta.User
	for _, u := range f.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out
}

func (f *fakeBackend) UpdateUser(_ context.Context, u meta.User) error {
	f.record("UpdateUser")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.users[u.Username]; !ok {
		return fmt.Errorf("user %q: %w", u.Username, ErrNotFound)
	}
	f.users[u.Username] = u
	return nil
}

func (f *fakeBackend) DeleteUser(_ context.Context, name string) error {
	f.record("DeleteUser")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.users[name]; !ok {
		return fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	delete(f.users, name)
	return nil
}

func (f *fakeBackend) Ready() error       { return f.ready }
func (f *fakeBackend) ShuttingDown() bool { return f.shutting }
