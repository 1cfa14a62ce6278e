package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout/cursorsync"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/replica"
)

// Defaults.
const (
	DefaultTick          = time.Second
	DefaultReplicaLagMax = 10 * time.Second // replica_lag_max
	DefaultFetchWait     = 2 * time.Second  // a follower's long-poll
	proposeTimeout       = 5 * time.Second
	maxFetchBytes        = 1 << 20
	// MaxPreCopies bounds the segment pre-copies a node runs at once (each holds 4 MiB of
	// receive buffers); a follower waiting for a slot neither copies nor fetches meanwhile.
	MaxPreCopies = 4
)

// Slot is one partition this node replicates: its topic record and assignment, as the local
// metastore replica has them.
type Slot struct {
	Topic meta.Topic
	A     meta.Assignment
}

// Partitions is what the manager needs of the partition registry (*partition.Registry).
type Partitions interface {
	Get(t meta.Topic, p int) (*partition.Partition, error)
	Peek(topic string, p int) *partition.Partition
	ClosePartition(pt *partition.Partition)
}

// Deps is what a Manager works with, fixed at construction.
type Deps struct {
	Self       string
	Partitions Partitions
	// Slots lists the partitions of replicated topics (replication_factor ≥ 2) whose replica
	// set names Self.
	Slots func() []Slot
	// MemberAddr is a member's cluster address.
	MemberAddr func(id string) (string, bool)
	// Source reaches the leader at addr for one partition (node RPC ops 34, 35).
	Source func(addr, topic string, p int, incarnation string, wait time.Duration) replica.Source
	// Segments reaches the leader at addr for a follower's segment pre-copy (node RPC ops 22
	// and 23 streamed, docs/internals/replication.md §5). nil, or a nil source: no pre-copy.
	Segments func(addr, topic string, p int) replica.SegmentSource
	// ProposeISR proposes op 23 (meta.Store.SetISR).
	ProposeISR func(ctx context.Context, topic string, p int, epoch uint64, expected, next []string) (meta.CASResult, meta.Assignment, error)
	// ProposeElect proposes op 24 (meta.Store.ElectLeader): a leader whose replica was found
	// empty hands the leadership on. nil: it leads anyway.
	ProposeElect func(ctx context.Context, topic string, p int, expectedEpoch uint64, newLeader, reason string) (meta.CASResult, meta.Assignment, error)
	// OnISRChange is told of every ISR change this node's leaderships make ("shrink" or
	// "expand"), for metrics and audit. nil: nothing.
	OnISRChange func(topic string, p int, change string, isr []string)
	Host        *replica.Host
	Logger      *slog.Logger
	Tick        time.Duration // 0 → DefaultTick
	LagMax      time.Duration // 0 → DefaultReplicaLagMax
	FetchWait   time.Duration // 0 → DefaultFetchWait

	// Stopping reports a member in a controlled shutdown (docs/internals/replication.md §9):
	// a leadership does not expand the ISR to it. nil: none is.
	Stopping func(id string) bool
}

type key struct {
	topic string
	p     int
}

// role is this node's current part in one partition: a leadership or a follower loop.
type role struct {
	incarnation string
	epoch       uint64
	pt          *partition.Partition // the leadership's open partition
	leader      *replica.Leader
	following   string // the leader followed
	cancel      context.CancelFunc
	done        chan struct{}
}

// Manager runs this node's roles in replicated partitions. Run drives it; Kick asks for a
// pass now.
type Manager struct {
	d    Deps
	log  *slog.Logger
	kick chan struct{}

	mu    sync.Mutex // guards roles; held by a pass
	roles map[key]*role

	started   time.Time // when this Manager (this process) started
	checkedMu sync.Mutex
	checked   map[key]bool // partitions leaveISRIfEmpty has settled in this process

	preCopies chan struct{} // the pre-copy slots (MaxPreCopies) of this node's followers
}

// New returns a Manager over d.
func New(d Deps) *Manager {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Tick <= 0 {
		d.Tick = DefaultTick
	}
	if d.LagMax <= 0 {
		d.LagMax = DefaultReplicaLagMax
	}
	if d.FetchWait <= 0 {
		d.FetchWait = DefaultFetchWait
	}
	if d.OnISRChange == nil {
		d.OnISRChange = func(string, int, string, []string) {}
	}
	return &Manager{d: d, log: d.Logger, kick: make(chan struct{}, 1), roles: make(map[key]*role),
		started: time.Now(), checked: make(map[key]bool), preCopies: make(chan struct{}, MaxPreCopies)}
}

// Kick asks for a pass as soon as possible (a metastore event applied). Never blocks.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Leader is the leadership this node holds for topic/p (partition.Deps.Leader).
func (m *Manager) Leader(topic string, p int) (*replica.Leader, bool) {
	return m.d.Host.Leader(topic, p)
}

// Run makes passes until ctx ends, then ends every role.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.d.Tick)
	defer t.Stop()
	defer m.stopAll()
	for {
		m.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.kick:
		}
	}
}

// pass brings every role in line with the assignments.
func (m *Manager) pass(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[key]bool)
	for _, s := range m.d.Slots() {
		k := key{s.Topic.Name, s.A.Partition}
		seen[k] = true
		if s.A.Owner == m.d.Self {
			m.lead(ctx, k, s)
		} else {
			m.follow(ctx, k, s)
		}
	}
	for k, r := range m.roles {
		if !seen[k] {
			m.end(k, r)
		}
	}
}

// lead takes up, or keeps up, the leadership of s.
func (m *Manager) lead(ctx context.Context, k key, s Slot) {
	r := m.roles[k]
	if r != nil && r.leader != nil && r.epoch == s.A.LeaderEpoch && r.incarnation == s.Topic.Incarnation &&
		m.d.Partitions.Peek(k.topic, k.p) == r.pt {
		if _, err := m.d.Partitions.Get(s.Topic, k.p); err == nil { // keeps the log from idle eviction
			m.keepConfig(k, s, r)
			m.keepISR(ctx, k, s, r)
		}
		return
	}
	if r != nil {
		m.end(k, r)
	}
	pt, err := m.d.Partitions.Get(s.Topic, k.p)
	if err != nil {
		m.log.Warn("replication: cannot open a led partition; retrying", "topic", k.topic, "partition", k.p, "err", err)
		return
	}
	if m.handOffIfEmpty(ctx, k, s, pt) {
		return
	}
	if err := pt.Epochs().Assign(s.A.LeaderEpoch, pt.Log().NextOffset()); err != nil {
		m.log.Error("replication: cannot record the leader epoch; not leading", "topic", k.topic, "partition", k.p,
			"epoch", s.A.LeaderEpoch, "err", err)
		return
	}
	ld, err := replica.NewLeader(replica.LeaderConfig{Self: m.d.Self, Epoch: s.A.LeaderEpoch,
		Replicas: s.A.ReplicaSet(), ISR: s.A.InSync(), MinISR: s.Topic.MinISR(), Log: pt.Log(),
		State:    func() []byte { return consumerState(pt) },
		Cursors:  func() []byte { return m.fanoutCursors(k, pt) },
		OnISRDue: m.Kick, // a follower caught up or lost its copy: check the ISR now, not at the tick
	})
	if err != nil {
		m.log.Error("replication: bad assignment; not leading", "topic", k.topic, "partition", k.p, "err", err)
		return
	}
	m.d.Host.Lead(k.topic, k.p, s.Topic.Incarnation, ld, pt.Log(), pt.Epochs())
	m.roles[k] = &role{incarnation: s.Topic.Incarnation, epoch: s.A.LeaderEpoch, pt: pt, leader: ld}
	m.log.Info("replication: leading", "topic", k.topic, "partition", k.p, "epoch", s.A.LeaderEpoch,
		"isr", s.A.InSync(), "hwm", pt.Log().HighWatermark(), "leo", pt.Log().NextOffset())
	if err := ld.Appended(); err != nil { // an ISR of the leader alone commits what it has
		m.log.Warn("replication: advance hwm", "topic", k.topic, "partition", k.p, "err", err)
	}
}

// keepConfig installs the metastore's replica list and min in-sync count in a running
// leadership when a reassignment step (op 25) or an alter changed them under the same epoch
// (docs/internals/replication.md §9).
func (m *Manager) keepConfig(k key, s Slot, r *role) {
	reps, minISR := s.A.ReplicaSet(), s.Topic.MinISR()
	if minISR > len(reps) {
		// R and M were raised together: the new M applies once the controller has added
		// the replicas (C12); until then the leadership keeps the M it has.
		minISR = r.leader.MinISR()
	}
	if r.leader.Configured(reps, minISR) {
		return
	}
	if err := r.leader.Reconfigure(r.epoch, reps, minISR); err != nil {
		m.log.Warn("replication: install replicas", "topic", k.topic, "partition", k.p, "replicas", reps,
			"min_insync", minISR, "err", err)
		return
	}
	m.log.Info("replication: replicas changed", "topic", k.topic, "partition", k.p, "replicas", reps, "min_insync", minISR)
}

// keepISR installs the metastore's ISR in the leadership and proposes a shrink or an expand
// when its followers call for one (docs/internals/replication.md §6).
func (m *Manager) keepISR(ctx context.Context, k key, s Slot, r *role) {
	ld := r.leader
	stored := s.A.InSync()
	if !sameSet(ld.ISR(), stored) {
		if err := ld.SetISR(r.epoch, stored); err != nil {
			m.log.Warn("replication: install isr", "topic", k.topic, "partition", k.p, "err", err)
		}
	}
	shrink, expand := ld.ShrinkCandidates(m.d.LagMax), ld.ExpandCandidates(m.d.LagMax)
	if m.d.Stopping != nil {
		expand = slices.DeleteFunc(expand, m.d.Stopping) // it left the ISR on its way out
	}
	if len(shrink) == 0 && len(expand) == 0 {
		return
	}
	var next []string
	for _, id := range s.A.ReplicaSet() {
		in := slices.Contains(stored, id) && !slices.Contains(shrink, id)
		if in || slices.Contains(expand, id) || id == m.d.Self {
			next = append(next, id)
		}
	}
	if sameSet(next, stored) {
		return
	}
	ld.ProposingISR(next)
	pctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	res, _, err := m.d.ProposeISR(pctx, k.topic, k.p, r.epoch, stored, next)
	cancel()
	if err != nil || (res != meta.CASDone && res != meta.CASAlreadyDone) {
		if perr := ld.ProposalFailed(); perr != nil {
			m.log.Warn("replication: advance hwm", "topic", k.topic, "partition", k.p, "err", perr)
		}
		m.log.Warn("replication: isr change not applied", "topic", k.topic, "partition", k.p, "isr", next, "err", err)
		return
	}
	if err := ld.SetISR(r.epoch, next); err != nil {
		m.log.Warn("replication: install isr", "topic", k.topic, "partition", k.p, "err", err)
	}
	change := "expand"
	if len(shrink) > 0 {
		change = "shrink"
	}
	m.log.Info("replication: isr changed", "topic", k.topic, "partition", k.p, "change", change, "isr", next,
		"lagging", shrink, "caught_up", expand)
	m.d.OnISRChange(k.topic, k.p, change, next)
}

// follow starts, or keeps running, the follower loop of s.
func (m *Manager) follow(ctx context.Context, k key, s Slot) {
	r := m.roles[k]
	if r != nil && r.cancel != nil && r.epoch == s.A.LeaderEpoch && r.following == s.A.Owner &&
		r.incarnation == s.Topic.Incarnation {
		return
	}
	if r != nil {
		m.end(k, r)
	}
	addr, ok := m.d.MemberAddr(s.A.Owner)
	if !ok {
		return // the leader's member record is not here yet; a later pass retries
	}
	fctx, cancel := context.WithCancel(ctx)
	r = &role{incarnation: s.Topic.Incarnation, epoch: s.A.LeaderEpoch, following: s.A.Owner, cancel: cancel,
		done: make(chan struct{})}
	m.roles[k] = r
	src := m.d.Source(addr, k.topic, k.p, s.Topic.Incarnation, m.d.FetchWait)
	var segs replica.SegmentSource
	if m.d.Segments != nil {
		segs = m.d.Segments(addr, k.topic, k.p)
	}
	go func() {
		defer close(r.done)
		m.runFollower(fctx, k, s, src, segs)
	}()
}

// runFollower follows one leader for one epoch until ctx ends: reconcile, then fetch, with a
// backoff after failures (a leader being elected, restarting or not yet leading answers
// refusals for a moment).
func (m *Manager) runFollower(ctx context.Context, k key, s Slot, src replica.Source, segs replica.SegmentSource) {
	backoff := 100 * time.Millisecond
	var lastLog time.Time
	for ctx.Err() == nil {
		err := m.followOnce(ctx, k, s, src, segs)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			level := slog.LevelWarn
			if errors.Is(err, errcode.ErrStaleEpoch) || errors.Is(err, errcode.ErrNotOwner) ||
				errors.Is(err, errcode.ErrTopicGone) {
				// The assignment is changing, or the leader has not applied the topic yet; the
				// next pass restarts this loop.
				level = slog.LevelInfo
			}
			m.log.Log(ctx, level, "replication: follower fetch failed; retrying", "topic", k.topic, "partition", k.p,
				"leader", s.A.Owner, "epoch", s.A.LeaderEpoch, "err", err)
		}
		if clock.Sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// followOnce opens the log, reconciles with the leader, pre-copies the leader's sealed
// segments when the log can take them whole, and fetches until an error.
func (m *Manager) followOnce(ctx context.Context, k key, s Slot, src replica.Source, segs replica.SegmentSource) error {
	pt, err := m.d.Partitions.Get(s.Topic, k.p)
	if err != nil {
		return err
	}
	if err := m.leaveISRIfEmpty(ctx, k, pt); err != nil {
		return err
	}
	fw := &replica.Follower{Self: m.d.Self, Epoch: s.A.LeaderEpoch, Log: pt.Log(), Epochs: pt.Epochs(),
		Source: src, MaxBytes: maxFetchBytes, CatchUpMaxBytes: replica.DefaultCatchUpMaxBytes,
		OnConsumerState: func(b []byte) error { return consume.StoreReplicatedCheckpoint(pt.Dir(), b) },
		OnFanoutCursors: func(b []byte) error { return cursorsync.Apply(ctx, pt.Dir(), b) },
		PreCopySlots:    m.preCopies}
	if err := fw.Reconcile(ctx); err != nil {
		return err
	}
	if err := m.preCopy(ctx, k, s, fw, segs); err != nil {
		return err
	}
	for ctx.Err() == nil {
		if cur, err := m.d.Partitions.Get(s.Topic, k.p); err != nil || cur != pt {
			return err // closed or reopened: start over on the current log
		}
		if err := fw.FetchOnce(ctx); err != nil {
			return err
		}
	}
	return nil
}

// preCopy runs fw's segment pre-copy from segs and logs what it copied.
func (m *Manager) preCopy(ctx context.Context, k key, s Slot, fw *replica.Follower, segs replica.SegmentSource) error {
	if segs == nil {
		return nil
	}
	start := time.Now()
	res, err := fw.PreCopy(ctx, segs)
	if res.Segments > 0 {
		secs := time.Since(start).Seconds()
		m.log.Info("replication: pre-copied the leader's segments", "topic", k.topic, "partition", k.p,
			"leader", s.A.Owner, "segments", res.Segments, "bytes", res.Bytes, "from", res.From, "to", res.To,
			"seconds", secs, "mb_per_s", float64(res.Bytes)/1e6/max(secs, 1e-6))
	}
	if err != nil {
		return fmt.Errorf("replication: pre-copy: %w", err)
	}
	return nil
}

// leaveISRIfEmpty takes this follower out of k's ISR when this process found its replica empty
// (no record, no leader epoch) although the topic is older than the process and the metastore
// holds the replica in sync: its records went with its data directory. Left in the ISR it
// could be elected over a replica that holds them when the leader dies before it has copied
// them. The leader adds it back once it has caught up (docs/internals/replication.md §9, empty
// disk). Settled once per partition and process; an error (the proposal failed) is retried.
func (m *Manager) leaveISRIfEmpty(ctx context.Context, k key, pt *partition.Partition) error {
	m.checkedMu.Lock()
	done := m.checked[k]
	m.checkedMu.Unlock()
	if done {
		return nil
	}
	s, ok := m.slot(k)
	if !ok {
		return nil
	}
	if m.emptyInSync(s, pt) {
		stored := s.A.InSync()
		next := slices.DeleteFunc(slices.Clone(stored), func(id string) bool { return id == m.d.Self })
		pctx, cancel := context.WithTimeout(ctx, proposeTimeout)
		res, _, err := m.d.ProposeISR(pctx, k.topic, k.p, s.A.LeaderEpoch, stored, next)
		cancel()
		switch {
		case res == meta.CASNotFound:
			return nil // the partition is gone; the next pass ends this role
		case res != meta.CASDone && res != meta.CASAlreadyDone:
			if err == nil {
				err = fmt.Errorf("outcome %v", res)
			}
			return fmt.Errorf("replication: leave the isr of %s/%d with an empty replica: %w", k.topic, k.p, err)
		}
		m.log.Warn("replication: replica found empty; left the isr until it has caught up", "topic", k.topic,
			"partition", k.p, "epoch", s.A.LeaderEpoch, "isr", next)
		m.d.OnISRChange(k.topic, k.p, "shrink", next)
	}
	m.settle(k)
	return nil
}

// handOffIfEmpty keeps this node from leading k with a replica this process found empty while
// other replicas are in the ISR: its records went with its data directory (it came back
// before the controller's failover), and leading would serve an empty log that the in-sync
// replicas refuse to truncate to. It proposes op 24 to the first other in-sync replica in
// replica order, reason dead (so it leaves the ISR with its leadership), and reports true
// while it must not lead: until that is applied (a failed proposal is retried by the next
// pass). Settled once per partition and process (docs/internals/replication.md §6).
func (m *Manager) handOffIfEmpty(ctx context.Context, k key, s Slot, pt *partition.Partition) bool {
	m.checkedMu.Lock()
	done := m.checked[k]
	m.checkedMu.Unlock()
	if done || m.d.ProposeElect == nil {
		return false
	}
	next := ""
	for _, id := range s.A.ReplicaSet() {
		if id != m.d.Self && slices.Contains(s.A.InSync(), id) && next == "" {
			next = id
		}
	}
	if next == "" || !m.emptyReplica(s, pt) {
		m.settle(k)
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, proposeTimeout)
	res, _, err := m.d.ProposeElect(pctx, k.topic, k.p, s.A.LeaderEpoch, next, meta.ElectDead)
	cancel()
	if res != meta.CASDone && res != meta.CASAlreadyDone {
		m.log.Warn("replication: replica found empty; handing the leadership on failed, retrying", "topic", k.topic,
			"partition", k.p, "epoch", s.A.LeaderEpoch, "to", next, "outcome", res, "err", err)
		return true
	}
	m.log.Warn("replication: replica found empty; handed the leadership on and left the isr until it has caught up",
		"topic", k.topic, "partition", k.p, "epoch", s.A.LeaderEpoch, "to", next)
	m.settle(k)
	return true
}

// settle records that k's emptiness check is done in this process.
func (m *Manager) settle(k key) {
	m.checkedMu.Lock()
	m.checked[k] = true
	m.checkedMu.Unlock()
}

// emptyInSync reports whether pt, this node's replica of s as a follower, is empty (see
// emptyReplica) while the metastore counts it in sync.
func (m *Manager) emptyInSync(s Slot, pt *partition.Partition) bool {
	if s.A.Owner == m.d.Self || !slices.Contains(s.A.InSync(), m.d.Self) {
		return false
	}
	return m.emptyReplica(s, pt)
}

// emptyReplica reports whether pt holds no record and no leader epoch although s's topic was
// created before this process started (a topic created since starts empty everywhere;
// CreatedAt 0 is unknown). CreatedAt is whole seconds: a topic created in the second this
// process started counts as older, since a lost disk must never lead or stay in the ISR
// empty; a new topic whose replica so takes itself for one that lost its records only hands
// its leadership on or leaves the ISR until its first fetch (docs/internals/replication.md §6).
func (m *Manager) emptyReplica(s Slot, pt *partition.Partition) bool {
	if s.Topic.CreatedAt <= 0 || s.Topic.CreatedAt > m.started.Unix() {
		return false
	}
	_, hasEpoch := pt.Epochs().Latest()
	return !hasEpoch && pt.Log().NextOffset() == 0
}

// slot is k's current slot, as the local metastore replica has it.
func (m *Manager) slot(k key) (Slot, bool) {
	for _, s := range m.d.Slots() {
		if s.Topic.Name == k.topic && s.A.Partition == k.p {
			return s, true
		}
	}
	return Slot{}, false
}

// end ends role r of k: a leadership is deposed, unhosted and its partition closed (its
// consume shard and leases go with it); a follower loop is stopped and waited for.
func (m *Manager) end(k key, r *role) {
	delete(m.roles, k)
	if r.leader != nil {
		m.d.Host.Drop(k.topic, k.p, r.leader)
		if pt := m.d.Partitions.Peek(k.topic, k.p); pt != nil && pt == r.pt {
			m.d.Partitions.ClosePartition(pt)
		}
		m.log.Info("replication: leadership ended", "topic", k.topic, "partition", k.p, "epoch", r.epoch)
	}
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
}

// stopAll ends every role (Run's exit).
func (m *Manager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.roles {
		m.end(k, r)
	}
}

// consumerState is a led partition's consumer state for its followers: the shard's frontier
// and acked-ahead set, nil while no consume attached a shard (docs/internals/replication.md §8).
func consumerState(pt *partition.Partition) []byte {
	s := pt.Shard()
	if s == nil {
		return nil
	}
	return consume.EncodeCheckpoint(s.Frontier())
}

// fanoutCursors is a led partition's fan-out cursor positions for its followers: the cursor
// files of its directory (docs/internals/replication.md §8); nil when they cannot be read.
func (m *Manager) fanoutCursors(k key, pt *partition.Partition) []byte {
	b, err := cursorsync.Snapshot(context.Background(), pt.Dir())
	if err != nil {
		m.log.Warn("replication: cannot read the fan-out cursors to copy", "topic", k.topic, "partition", k.p, "err", err)
		return nil
	}
	return b
}

// sameSet reports whether a and b hold the same members (both duplicate-free).
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
