package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/faults"
)

// Event describes one applied command that changed state. It is delivered to Config.OnApply
// on the FSM goroutine, after the entry's batch is committed and versions are bumped.
// Fields that do not apply to the op are zero ("" / Partition -1).
type Event struct {
	Op          uint8  // command op; OpRestore (0) after a snapshot restore replaced everything
	Topic       string // topic the op is about (attach/detach: the child)
	Incarnation string // the topic's incarnation (delete: the deleted one)
	Parent      string // attach/detach/create-as-child: the parent; delete of a child: its former parent
	Partition   int    // assignment ops; -1 otherwise
	Member      string // member ops; assignment ops: the owner after the op
	User        string // user ops
}

// appliedRecord is the value of m/applied.
type appliedRecord struct {
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
}

// fsm is the replicated state machine, durable in its own pebble DB (docs/internals/metastore.md §4).
//
// Invariant: m/applied is written in the same pebble batch as the mutations of the entry it
// names, so the DB always holds exactly the effect of entries 1…m/applied; Apply skips any
// entry at or below it, which makes replay after a crash (lost NoSync tail) idempotent.
// Concurrency: raft calls Apply, Snapshot and Restore from its FSM goroutine only; local
// reads run concurrently on other goroutines and hold restoreMu for reading, which only
// Restore takes for writing.
type fsm struct {
	db       *pebble.DB
	logger   *slog.Logger
	versions *domainVersions
	onApply  func(Event)

	restoreMu sync.RWMutex
	closed    bool // under restoreMu; set by close, reads then return nothing

	appliedIndex atomic.Uint64 // m/applied.index as committed
	appliedTerm  atomic.Uint64
	lastSeen     atomic.Uint64 // highest index handed to Apply (skipped entries included)
	applying     atomic.Bool   // inside Apply right now
	topicCount   atomic.Int64
	applies      signal // notified after each applied entry and each restore (Store.NextApply)
}

var _ raft.FSM = (*fsm)(nil)

// openFSM opens the FSM DB at dir (fs nil → disk), loads m/applied and bumps every version.
func openFSM(dir string, fs vfs.FS, logger *slog.Logger, onApply func(Event)) (*fsm, error) {
	if logger == nil {
		logger = discardLogger()
	}
	db, err := pebble.Open(dir, pebbleOptions(fs, logger))
	if err != nil {
		return nil, fmt.Errorf("meta: open fsm %s: %w", dir, err)
	}
	f := &fsm{db: db, logger: logger, versions: newDomainVersions(), onApply: onApply}
	if err := f.loadApplied(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return f, nil
}

func (f *fsm) close() error {
	f.restoreMu.Lock()
	defer f.restoreMu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.db.Close()
}

// loadApplied reads m/applied and the topic count from the DB.
func (f *fsm) loadApplied() error {
	var rec appliedRecord
	v, closer, err := f.db.Get(keyApplied)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("meta: read m/applied: %w", err)
	default:
		err = json.Unmarshal(v, &rec)
		closer.Close()
		if err != nil {
			return fmt.Errorf("meta: decode m/applied: %w", err)
		}
	}
	f.appliedIndex.Store(rec.Index)
	f.appliedTerm.Store(rec.Term)
	n, err := countPrefix(f.db, []byte(prefixTopic))
	if err != nil {
		return err
	}
	f.topicCount.Store(int64(n))
	return nil
}

func countPrefix(r pebble.Reader, prefix []byte) (int, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Error(); err != nil {
		it.Close()
		return 0, err
	}
	return n, it.Close()
}

// applied returns the index of the last entry whose effect the DB holds.
func (f *fsm) applied() uint64 { return f.appliedIndex.Load() }

// Apply applies one committed command entry. It never returns an error value: the verdict
// is a Result. A storage failure panics, because skipping an entry would silently diverge
// this replica (the process restarts and replays from the Raft log).
func (f *fsm) Apply(l *raft.Log) any {
	f.applying.Store(true)
	defer f.applying.Store(false)
	defer func() {
		if l.Index > f.lastSeen.Load() {
			f.lastSeen.Store(l.Index)
		}
	}()
	if l.Index <= f.appliedIndex.Load() {
		return Result{Outcome: OutcomeSkipped}
	}
	return f.applyEntry(l)
}

func (f *fsm) applyEntry(l *raft.Log) Result {
	x := newTxn(f.db)
	defer func() { x.b.Close() }()
	cmd, err := decodeCommand(l.Data)
	var res Result
	if err != nil {
		f.logger.Error("undecodable metastore command; applied as a no-op",
			"index", l.Index, "err", err)
		res = invalid("%v", err)
	} else {
		res = x.dispatch(cmd)
	}
	if !success(res.Outcome) {
		// Refused commands change nothing; only m/applied moves.
		x.b.Close()
		x = newTxn(f.db)
	}
	x.put(keyApplied, appliedRecord{Index: l.Index, Term: l.Term})
	if err := x.b.Commit(pebble.NoSync); err != nil {
		panic(fmt.Sprintf("meta: fsm commit of entry %d failed: %v", l.Index, err))
	}
	_ = faults.Check("meta.fsm.after_commit") // crash here leaves an unsynced pebble tail (CL-2)
	f.appliedIndex.Store(l.Index)
	f.appliedTerm.Store(l.Term)
	f.topicCount.Add(x.topicDelta)
	f.versions.apply(x.ch)
	f.applies.notify()
	if x.ch.wrote && f.onApply != nil {
		x.ev.Op = cmd.op
		f.onApply(x.ev)
	}
	return res
}

func success(o Outcome) bool {
	return o == OutcomeOK || o == OutcomeAlreadyDone || o == OutcomeNoop
}

// dispatch runs the handler of cmd. Handlers check every precondition before writing, and
// their result is final; the batch is discarded unless the outcome is a success.
func (x *txn) dispatch(cmd command) Result {
	switch p := cmd.payload.(type) {
	case *createTopicCmd:
		return x.createTopic(p)
	case *updateTopicCmd:
		return x.updateTopic(p)
	case *deleteTopicCmd:
		return x.deleteTopic(p)
	case *putSchemaCmd:
		return x.putSchema(p)
	case *assignCmd:
		return x.assignPartition(p)
	case *memberCmd:
		return x.memberJoin(p)
	case *heartbeatCmd:
		return x.memberHeartbeat(p)
	case *memberIDCmd:
		if cmd.op == OpRemoveMember {
			return x.removeMember(p)
		}
		return x.memberDead(p)
	case *drainCmd:
		return x.setDraining(p)
	case *userCmd:
		switch cmd.op {
		case OpCreateUser:
			return x.createUser(p)
		case OpUpdateUser:
			return x.updateUser(p)
		default:
			return x.seedRootUser(p)
		}
	case *userNameCmd:
		return x.deleteUser(p)
	case *attachCmd:
		return x.attachChild(p)
	case *detachCmd:
		return x.detachChild(p)
	case *setTargetCmd:
		return x.setAssignmentTarget(p)
	case *completeMoveCmd:
		return x.completeMove(p)
	case *abortMoveCmd:
		return x.abortMove(p)
	case *attachRemoteCmd:
		return x.attachRemote(p)
	case *detachRemoteCmd:
		return x.detachRemote(p)
	case *resealRemoteCmd:
		return x.resealRemote(p)
	case *setISRCmd:
		return x.setISR(p)
	case *electLeaderCmd:
		return x.electLeader(p)
	case *setReplicasCmd:
		return x.setReplicas(p)
	}
	return invalid("unhandled op %d", cmd.op)
}

// txn is one entry's pebble batch (indexed: reads see the entry's own writes) plus what it
// touched. Storage and decode errors panic (see Apply).
type txn struct {
	b          *pebble.Batch
	ch         *changes
	ev         Event
	topicDelta int64
}

func newTxn(db *pebble.DB) *txn {
	return &txn{b: db.NewIndexedBatch(), ch: newChanges(), ev: Event{Partition: -1}}
}

func (x *txn) get(key []byte, v any) bool {
	raw, closer, err := x.b.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false
	}
	if err != nil {
		panic(fmt.Sprintf("meta: fsm read %q: %v", key, err))
	}
	defer closer.Close()
	mustDecode(key, raw, v)
	return true
}

func (x *txn) put(key []byte, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("meta: fsm encode %q: %v", key, err))
	}
	if err := x.b.Set(key, raw, nil); err != nil {
		panic(fmt.Sprintf("meta: fsm write %q: %v", key, err))
	}
}

func (x *txn) del(key []byte) {
	if err := x.b.Delete(key, nil); err != nil {
		panic(fmt.Sprintf("meta: fsm delete %q: %v", key, err))
	}
}

func (x *txn) delPrefix(prefix []byte) {
	if err := x.b.DeleteRange(prefix, prefixEnd(prefix), nil); err != nil {
		panic(fmt.Sprintf("meta: fsm delete range %q: %v", prefix, err))
	}
}

// scan calls fn for every key under prefix in ascending order (values valid during fn).
func (x *txn) scan(prefix []byte, fn func(k, v []byte)) {
	it, err := x.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		panic(fmt.Sprintf("meta: fsm iterate %q: %v", prefix, err))
	}
	for ok := it.First(); ok; ok = it.Next() {
		fn(it.Key(), it.Value())
	}
	if err := it.Error(); err != nil {
		panic(fmt.Sprintf("meta: fsm iterate %q: %v", prefix, err))
	}
	_ = it.Close()
}

func (x *txn) topic(name string) (Topic, bool) {
	var t Topic
	ok := x.get(topicKey(name), &t)
	return t, ok
}

func (x *txn) putTopic(t Topic) {
	x.put(topicKey(t.Name), t)
	x.ch.topics[t.Name] = struct{}{}
	x.ch.wrote = true
}

func (x *txn) assignment(topic string, p int) (Assignment, bool) {
	var a Assignment
	ok := x.get(assignmentKey(topic, p), &a)
	return a, ok
}

// putAssignment stores a in its canonical form (replicaset.go) and returns that form.
func (x *txn) putAssignment(a Assignment) Assignment {
	a = canonical(a)
	x.put(assignmentKey(a.Topic, a.Partition), a)
	x.ch.assignments[a.Topic] = struct{}{}
	x.ch.wrote = true
	return a
}

func (x *txn) member(id string) (Member, bool) {
	var m Member
	ok := x.get(memberKey(id), &m)
	return m, ok
}

func (x *txn) putMember(m Member) {
	x.put(memberKey(m.ID), m)
	x.ch.wrote = true
}

func (x *txn) user(name string) (User, bool) {
	var u User
	ok := x.get(userKey(name), &u)
	return u, ok
}

func (x *txn) putUser(u User) {
	x.put(userKey(u.Username), u)
	x.ch.users = true
	x.ch.wrote = true
}

// schemas returns the topic's schema history in version order.
func (x *txn) schemas(topic string) []Schema {
	var out []Schema
	x.scan(schemaPrefix(topic), func(k, v []byte) {
		var s Schema
		mustDecode(k, v, &s)
		out = append(out, s)
	})
	return out
}

func (x *txn) writeSchema(s Schema) {
	x.put(schemaKey(s.Topic, s.Version), s)
	x.ch.schemas[s.Topic] = struct{}{}
	x.ch.wrote = true
}

// mustDecode decodes a stored record; a record that does not decode means a corrupt FSM.
func mustDecode(key, raw []byte, v any) {
	if err := json.Unmarshal(raw, v); err != nil {
		panic(fmt.Sprintf("meta: fsm record %q does not decode: %v", key, err))
	}
}
