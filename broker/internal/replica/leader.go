package replica

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"narad.dev/broker/internal/errcode"
)

// Errors of the leader side, each a kind of an errcode sentinel so node RPC carries it
// (errcode.Replica plane) and HTTP maps it.
var (
	// ErrStaleEpoch refuses a call made under another leader epoch than the current one.
	ErrStaleEpoch = errcode.ErrStaleEpoch
	// ErrNotReplica refuses a fetch from a node that is not a replica of the partition.
	ErrNotReplica = errcode.Sub("not a replica of this partition", errcode.ErrInvalid)
	// ErrNotEnoughReplicas: the ISR has fewer than MinISR members, so no record can become
	// committed now (HTTP 503 not_enough_replicas).
	ErrNotEnoughReplicas = errcode.ErrNotEnoughReplicas
	// ErrDeposed: this node is no longer the leader of the epoch; what it appended but did not
	// commit may be truncated by the next leader.
	ErrDeposed = errcode.Sub("leader deposed", errcode.ErrNotOwner)
	// ErrFetchBeyondEnd: a follower fetched past the leader's LEO; it must truncate first.
	ErrFetchBeyondEnd = errcode.Sub("fetch offset beyond the leader's end", errcode.ErrInvalid)
)

// LeaderLog is what a Leader needs of the partition log (log.Log has it).
type LeaderLog interface {
	NextOffset() int64
	HighWatermark() int64
	AdvanceHWM(h int64) error
	NotifyC() <-chan struct{}
}

// LeaderConfig describes one leadership: the partition's replicas and ISR as the metastore
// has them under Epoch.
type LeaderConfig struct {
	Self     string
	Epoch    uint64
	Replicas []string // every replica, Self included
	ISR      []string // Self included
	MinISR   int
	Log      LeaderLog
	Now      func() time.Time // nil → time.Now
	// State returns the partition's consumer state to copy to followers (an encoded
	// consume.Checkpoint), nil when there is none yet. nil: no consumer state is copied.
	State func() []byte
	// Cursors returns the fan-out cursor positions of the partition's links to copy to
	// followers (a cursorsync envelope), nil when there is nothing to send. nil: none are
	// copied.
	Cursors func() []byte
	// OnISRDue is called, outside the leader's locks and at most once per ISRDueEvery for
	// each follower, when a fetch makes that follower due for an ISR change: one outside
	// the ISR that has just caught up (an expand), or one inside it that fetched below the
	// HWM (a shrink at once). The caller checks the ISR then rather than at its next tick
	// (docs/internals/replication.md §6). It must not block. nil: nothing is called.
	OnISRDue func()
}

// ISRDueEvery is the least time between two OnISRDue calls for one follower: a follower that
// stays due (its expand is not proposed, as for a member shutting down) calls no more often
// than the manager's own tick would check.
const ISRDueEvery = time.Second

// followerState is what the leader knows of one follower.
type followerState struct {
	leo        int64     // the offset of its last fetch; -1 before its first
	fetchedAt  time.Time // when it last fetched
	caughtUpAt time.Time // the last time its LEO reached the leader's LEO (see Fetched)
	leaderLEO  int64     // the leader's LEO at its last fetch
	stateAt    time.Time // when it was last considered for the consumer state
	stateSent  string    // the consumer state it was last sent
	cursorSent string    // the fan-out cursors it was last sent
	dueAt      time.Time // when a fetch of it last called OnISRDue
}

// Leader is the leader's view of one replicated partition for one epoch. Safe for concurrent
// use.
type Leader struct {
	self    string
	epoch   uint64
	minISR  int
	log     LeaderLog
	now     func() time.Time
	state   func() []byte
	cursors func() []byte
	isrDue  func()

	advMu sync.Mutex // serializes AdvanceHWM calls (each fsyncs the hwm file)

	mu        sync.Mutex
	isr       []string // as the metastore holds it
	pending   []string // an ISR proposed and not yet applied; nil when none
	followers map[string]*followerState
	deposed   bool
	changed   chan struct{} // closed and replaced on every ISR change and on Depose
}

// NewLeader starts tracking a leadership. Followers start out of date: one not in the ISR
// counts as caught up only once it fetches the leader's LEO; one in the ISR is given
// replica-lag time from now before it can be dropped.
func NewLeader(cfg LeaderConfig) (*Leader, error) {
	if !slices.Contains(cfg.ISR, cfg.Self) || !slices.Contains(cfg.Replicas, cfg.Self) {
		return nil, fmt.Errorf("replica: %s leads but is not in replicas %v / isr %v", cfg.Self, cfg.Replicas, cfg.ISR)
	}
	if cfg.MinISR < 1 || cfg.MinISR > len(cfg.Replicas) {
		return nil, fmt.Errorf("replica: min in-sync %d for %d replicas", cfg.MinISR, len(cfg.Replicas))
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	l := &Leader{
		self: cfg.Self, epoch: cfg.Epoch, minISR: cfg.MinISR, log: cfg.Log, now: now, state: cfg.State, cursors: cfg.Cursors,
		isrDue:    cfg.OnISRDue,
		isr:       slices.Clone(cfg.ISR),
		followers: make(map[string]*followerState),
		changed:   make(chan struct{}),
	}
	t := now()
	for _, r := range cfg.Replicas {
		if r != cfg.Self {
			l.followers[r] = &followerState{leo: -1, caughtUpAt: t}
		}
	}
	return l, nil
}

// Epoch is the leader epoch this Leader serves.
func (l *Leader) Epoch() uint64 { return l.epoch }

// Fetched records that follower asked, under epoch, for the records from offset: every
// record below offset is fsynced on it. It may advance the HWM. A follower is caught up when
// it asks for the leader's current LEO, or for at least the LEO the leader had at its previous
// fetch (then it was caught up at that fetch); ShrinkCandidates reads that time. A fetch that
// makes the follower due for an ISR change calls OnISRDue.
func (l *Leader) Fetched(follower string, epoch uint64, offset int64) error {
	hwm := l.log.HighWatermark()
	leo := l.log.NextOffset()
	l.mu.Lock()
	if err := l.checkLocked(epoch); err != nil {
		l.mu.Unlock()
		return err
	}
	f, ok := l.followers[follower]
	if !ok {
		l.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotReplica, follower)
	}
	if offset > leo {
		l.mu.Unlock()
		return fmt.Errorf("%w: %d > %d", ErrFetchBeyondEnd, offset, leo)
	}
	t := l.now()
	switch {
	case offset >= leo:
		f.caughtUpAt = t
	case offset >= f.leaderLEO && f.leo >= 0 && f.fetchedAt.After(f.caughtUpAt):
		f.caughtUpAt = f.fetchedAt
	}
	if f.leo >= 0 && offset < f.leo {
		// Its LEO went back within one epoch: it lost its copy (a wiped disk), and with it the
		// consumer state and cursors it was sent; they go again when next due.
		f.stateSent, f.cursorSent = "", ""
	}
	f.leo, f.fetchedAt, f.leaderLEO = offset, t, leo
	due := l.isrDue != nil && l.dueLocked(follower, f, hwm, t)
	if due {
		f.dueAt = t
	}
	l.mu.Unlock()
	if due {
		l.isrDue()
	}
	return l.advance()
}

// dueLocked reports whether follower f, after its fetch at t, is due for an ISR change by the
// rules of ShrinkCandidates (below the HWM in the ISR) and ExpandCandidates (at the HWM
// outside it, caught up within ISRDueEvery; replica_lag_max is 10 s by default), and was not
// reported within ISRDueEvery. Caller holds mu.
func (l *Leader) dueLocked(follower string, f *followerState, hwm int64, t time.Time) bool {
	if !f.dueAt.IsZero() && t.Sub(f.dueAt) < ISRDueEvery {
		return false
	}
	if slices.Contains(l.isr, follower) {
		return f.leo < hwm
	}
	return !slices.Contains(l.pending, follower) && f.leo >= hwm && t.Sub(f.caughtUpAt) < ISRDueEvery
}

// changedC returns a channel closed at the next ISR change or Depose.
func (l *Leader) changedC() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// CheckLeading returns ErrDeposed once the leadership ended.
func (l *Leader) CheckLeading() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deposed {
		return ErrDeposed
	}
	return nil
}

// Appended is called after the leader appended records: with an ISR of the leader alone
// (and MinISR 1) they commit at once.
func (l *Leader) Appended() error { return l.advance() }

// checkLocked refuses calls of another epoch and calls after Depose. Caller holds mu.
func (l *Leader) checkLocked(epoch uint64) error {
	if l.deposed {
		return ErrDeposed
	}
	if epoch != l.epoch {
		return fmt.Errorf("%w: %d, leader is at %d", ErrStaleEpoch, epoch, l.epoch)
	}
	return nil
}

// target is the HWM the ISR allows now, and whether it may move at all. While an ISR change
// is in flight the lowest LEO is taken over both the applied and the proposed ISR, so the HWM
// never passes a replica that either of them may elect (docs/internals/replication.md §6).
func (l *Leader) target() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deposed || len(l.isr) < l.minISR {
		return 0, false
	}
	h := l.log.NextOffset()
	for _, set := range [][]string{l.isr, l.pending} {
		for _, r := range set {
			if f, ok := l.followers[r]; ok {
				h = min(h, f.leo)
			}
		}
	}
	return h, h >= 0
}

// advance moves the log's HWM to what the ISR allows.
func (l *Leader) advance() error {
	l.advMu.Lock()
	defer l.advMu.Unlock()
	return l.advanceLocked()
}

// advanceLocked is advance for a holder of advMu.
func (l *Leader) advanceLocked() error {
	h, ok := l.target()
	if !ok || h <= l.log.HighWatermark() {
		return nil
	}
	return l.log.AdvanceHWM(h)
}

// CanAppend refuses a produce before it appends: ErrNotEnoughReplicas while the ISR is
// below MinISR, ErrDeposed after Depose.
func (l *Leader) CanAppend() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deposed {
		return ErrDeposed
	}
	if len(l.isr) < l.minISR {
		return fmt.Errorf("%w: %d in sync, %d required", ErrNotEnoughReplicas, len(l.isr), l.minISR)
	}
	return nil
}

// WaitCommitted waits until every record below end is committed (HWM ≥ end). It fails with
// ErrNotEnoughReplicas if the ISR falls below MinISR meanwhile, ErrDeposed if leadership is
// lost, or ctx's error. The records may still be committed later (by this leader or the
// next): a failure here means "unknown", never "not written".
func (l *Leader) WaitCommitted(ctx context.Context, end int64) error {
	for {
		notify := l.log.NotifyC()
		l.mu.Lock()
		changed, deposed, short := l.changed, l.deposed, len(l.isr) < l.minISR
		l.mu.Unlock()
		if l.log.HighWatermark() >= end {
			return nil
		}
		if deposed {
			return ErrDeposed
		}
		if short {
			return fmt.Errorf("%w after the append", ErrNotEnoughReplicas)
		}
		select {
		case <-notify:
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ISR returns the in-sync replicas as this leader knows them.
func (l *Leader) ISR() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.isr)
}

// ProposingISR marks isr as proposed to the metastore: until SetISR installs the outcome
// (or ProposalFailed), the HWM waits for the members of both. Call it before proposing.
func (l *Leader) ProposingISR(isr []string) {
	l.advMu.Lock() // an advance computed without the proposal must finish first
	defer l.advMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = slices.Clone(isr)
}

// ProposalFailed forgets an ISR proposal that was not applied.
func (l *Leader) ProposalFailed() error {
	l.mu.Lock()
	l.pending = nil
	l.mu.Unlock()
	return l.advance()
}

// SetISR installs the ISR the metastore now holds for this epoch (after a SetISR this
// leader proposed, or any other change) and ends any proposal. It may advance the HWM: a
// follower that left the ISR no longer holds it back.
func (l *Leader) SetISR(epoch uint64, isr []string) error {
	l.advMu.Lock()
	defer l.advMu.Unlock()
	l.mu.Lock()
	if err := l.checkLocked(epoch); err != nil {
		l.mu.Unlock()
		return err
	}
	if !slices.Contains(isr, l.self) {
		l.mu.Unlock()
		return fmt.Errorf("replica: ISR %v without its leader %s", isr, l.self)
	}
	l.isr = slices.Clone(isr)
	l.pending = nil
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return l.advanceLocked()
}

// ShrinkCandidates are the ISR followers not caught up for longer than lagMax, and at once
// every ISR follower whose last fetch asked for an offset below the HWM: an in-sync replica
// never lacks a committed record, so that one lost its log (it came back with an empty data
// directory) and holds the HWM back until it has copied it all. The leader proposes an ISR
// without them (docs/internals/replication.md §6).
func (l *Leader) ShrinkCandidates(lagMax time.Duration) []string {
	hwm := l.log.HighWatermark()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	var out []string
	for _, r := range l.isr {
		f, ok := l.followers[r]
		if ok && (t.Sub(f.caughtUpAt) > lagMax || (f.leo >= 0 && f.leo < hwm)) {
			out = append(out, r)
		}
	}
	return out
}

// ExpandCandidates are the followers outside the ISR whose LEO has reached the HWM and that
// were caught up with the leader's LEO within lagMax: the leader proposes an ISR with them.
// The second condition keeps a follower that stopped fetching out: while the HWM cannot move
// (fewer than min_insync_replicas in sync) its last fetch stays at the HWM, and expanding it
// would only have ShrinkCandidates drop it again, in a loop.
func (l *Leader) ExpandCandidates(lagMax time.Duration) []string {
	hwm := l.log.HighWatermark()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	var out []string
	for r, f := range l.followers {
		if !slices.Contains(l.isr, r) && f.leo >= hwm && f.leo >= 0 && t.Sub(f.caughtUpAt) <= lagMax {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// Lag returns each follower's distance from the leader's LEO in records (the leader's LEO
// for a follower that has not fetched yet).
func (l *Leader) Lag() map[string]int64 {
	leo := l.log.NextOffset()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.followers))
	for r, f := range l.followers {
		out[r] = leo - max(f.leo, 0)
	}
	return out
}

// Depose ends this leadership: every later call is refused and every waiter wakes with
// ErrDeposed. Idempotent.
func (l *Leader) Depose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.deposed {
		l.deposed = true
		close(l.changed)
		l.changed = make(chan struct{})
	}
}
