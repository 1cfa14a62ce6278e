package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"narad.dev/broker/internal/clock"
	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// Cluster timeouts (docs/internals/metastore.md §14).
const (
	peerCallTimeout      = 5 * time.Second  // default peer RPC
	forwardCreateTimeout = 75 * time.Second // a create may wait behind the leader's create gate
	pinnedRPCSlack       = 2 * time.Second  // a forwarded long-poll's deadline = wait + 2 s
	statsFanout          = 16               // remote partition stats fetched at once
	leaderWait           = 3 * time.Second  // how long a write waits for a leader to be known
	statsRetryPause      = 200 * time.Millisecond
	statsTimeout         = 2 * time.Second // a describe waits at most this for a frozen owner
	awaitTopicTimeout    = 1 * time.Second // a follower's wait for a topic the leader already has
)

// Peers is the engine's view of the node-to-node RPC (docs/internals/node-rpc.md §4); the server
// implements it over the cluster port. addr is always a peer's cluster address. Errors wrap
// the api sentinels (ErrNotFound, ErrExists, ErrConflict, ErrInvalid, ErrStale, ErrGone,
// ErrUnavailable) or ErrNotOwner / meta.ErrNotLeader for a 421, so callers can branch on them.
type Peers interface {
	// Consume runs op 2 on the owner: a replay (offset ≥ 0), a pinned long-poll, or with
	// localOnly a non-blocking queue probe of the owner's partitions.
	Consume(ctx context.Context, addr, topic string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error)
	// Ack runs op 31 on the owner; one result per entry, in order.
	Ack(ctx context.Context, addr, topic string, entries []service.AckEntry) ([]error, error)
	// PartitionStats runs op 8 (peek) on the owner.
	PartitionStats(ctx context.Context, addr, topic string, partition int) (service.PartitionStats, error)
	// CreateTopic, AlterTopic and DeleteTopic run ops 4–6 on the leader; the returned index is
	// the Raft index of the applied entry.
	CreateTopic(ctx context.Context, addr string, req service.CreateTopicRequest) (meta.Topic, uint64, error)
	AlterTopic(ctx context.Context, addr, name string, req service.AlterTopicRequest) (meta.Topic, uint64, error)
	DeleteTopic(ctx context.Context, addr, name string) (uint64, error)
	// TopicKnown asks the node at addr whether its replica has the topic (op 20, a plain
	// local read there, no barrier).
	TopicKnown(ctx context.Context, addr, name string) (bool, error)
	// ExactHighWatermark asks a partition's owner for its committed HWM (op 8, exact: the
	// owner opens a closed log whose hwm file is not CLEAN).
	ExactHighWatermark(ctx context.Context, addr, topic string, partition int) (int64, error)
	// AttachChild and DetachChild run ops 15 and 16 on the leader.
	AttachChild(ctx context.Context, addr, parent, child string, delayMs int64) (meta.Topic, uint64, error)
	DetachChild(ctx context.Context, addr, parent, child string) (uint64, error)
	// CommitRemote runs op 11 on a partition's owner (the dispatcher's and fan-out's commit).
	CommitRemote(ctx context.Context, addr, topic, incarnation string, partition int, recs []wal.Record) error
	// FanoutCursors runs op 17 on the owner of a parent partition.
	FanoutCursors(ctx context.Context, addr, parent string, partition int) (fanout.PartitionCursors, error)
	// ReplicaSource reaches the leader at addr of a replicated partition (ops 34, 35), holding
	// a fetch with nothing to return up to wait.
	ReplicaSource(addr, topic string, partition int, incarnation string, wait time.Duration) replica.Source
	// ReplicaSegments returns a follower's way to the sealed segments of the leader at addr
	// (ops 22 and 23 streamed), for its segment pre-copy.
	ReplicaSegments(addr, topic string, partition int) replica.SegmentSource
}

// owner describes who serves a partition, from the local replica.
type owner struct {
	id    string
	addr  string // cluster address; "" for this node
	local bool
	dead  bool // member record dead or missing
	known bool // the partition has an assignment
}

func (e *Engine) ownerOf(topic string, p int) owner {
	a, ok := e.view.Assignment(topic, p)
	if !ok || a.Owner == "" {
		return owner{}
	}
	if a.Owner == e.cfg.NodeID {
		return owner{id: a.Owner, local: true, known: true}
	}
	m, ok := e.view.Member(a.Owner)
	if !ok || m.Status == meta.MemberDead {
		return owner{id: a.Owner, dead: true, known: true, addr: m.ClusterAddr}
	}
	return owner{id: a.Owner, addr: m.ClusterAddr, known: true}
}

// leaderTarget returns the leader's cluster address when this node is a follower, "" when it
// leads. It waits up to leaderWait for a leader to be known, woken by the metastore's
// leader changes; none → ErrNoLeader (503).
func (e *Engine) leaderTarget(ctx context.Context) (string, error) {
	deadline := time.NewTimer(leaderWait)
	defer deadline.Stop()
	for {
		changed := e.meta.LeaderChange()
		if e.meta.IsLeader() {
			return "", nil
		}
		if id, addr := e.meta.Leader(); id != "" && addr != "" {
			if e.peers == nil {
				return "", fmt.Errorf("%w: this node is not the leader and cannot forward", meta.ErrNoLeader)
			}
			return addr, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return "", fmt.Errorf("%w: no raft leader is known (no quorum?)", meta.ErrNoLeader)
		case <-ctx.Done():
			return "", fmt.Errorf("%w: no raft leader is known", meta.ErrNoLeader)
		}
	}
}

// waitApplied waits (bounded by meta.DefaultApplyTimeout and ctx) until this replica applied
// index idx, so a read right after a forwarded write sees it. A timeout is not an error: the
// write is committed.
func (e *Engine) waitApplied(ctx context.Context, idx uint64) {
	if idx == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, meta.DefaultApplyTimeout)
	defer cancel()
	_ = e.meta.WaitApplied(ctx, idx)
}

// forwardWriteTries bounds forwardWrite: a write refused with ErrNotLeader (leadership moved
// while it was on its way) is sent to the new leader, forwardRetryWait later, up to this many
// times in all.
const (
	forwardWriteTries = 3
	forwardRetryWait  = 100 * time.Millisecond
)

// forwardWrite runs fn against the leader's cluster address (forwarded=true); when this node
// leads it returns forwarded=false and the caller writes locally. While the leader answers
// ErrNotLeader it waits forwardRetryWait (returning ctx's error if ctx ends first) and tries
// the leader known then: forwardWriteTries tries in all, then ErrNoLeader. After a successful
// forward it waits (bounded) for this replica to apply the write.
func (e *Engine) forwardWrite(ctx context.Context, fn func(addr string) (uint64, error)) (forwarded bool, err error) {
	for attempt := 0; attempt < forwardWriteTries; attempt++ {
		addr, err := e.leaderTarget(ctx)
		if err != nil {
			return false, err
		}
		if addr == "" {
			return false, nil // we lead: the caller runs the write locally
		}
		idx, err := fn(addr)
		if errors.Is(err, meta.ErrNotLeader) {
			if err := clock.Sleep(ctx, forwardRetryWait); err != nil {
				return true, err
			}
			continue
		}
		if err != nil {
			return true, err
		}
		e.waitApplied(ctx, idx)
		return true, nil
	}
	return true, fmt.Errorf("%w: leadership kept moving", meta.ErrNoLeader)
}

// AwaitTopic implements api.ReplicaStatus: for a topic this follower's replica does not have,
// it asks the leader whether the topic exists (a create elsewhere that this replica has not
// applied yet, milliseconds behind) and, if so, waits up to a second for the local replica to
// apply it. A client behind a load balancer thus never sees 404 for a topic it just created
// through another node. On the leader, or when the leader does not know the topic either, it
// returns false at once.
func (e *Engine) AwaitTopic(ctx context.Context, name string) (meta.Topic, bool) {
	if e.peers == nil || e.meta.IsLeader() {
		return meta.Topic{}, false
	}
	_, addr := e.meta.Leader()
	if addr == "" {
		return meta.Topic{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, awaitTopicTimeout)
	defer cancel()
	known, err := e.peers.TopicKnown(ctx, addr, name)
	if err != nil || !known {
		return meta.Topic{}, false
	}
	return e.awaitView(ctx, name)
}

// peerTopicWait bounds how long the owner side of a node RPC waits for its replica to learn a
// topic the caller already knows (a create applied on the leader milliseconds ago).
const peerTopicWait = time.Second

// TopicForPeer reads a topic for the owner side of a node RPC: a peer only names topics its
// own replica has, so a miss here usually means this replica is milliseconds behind; wait
// briefly for it (bounded by peerTopicWait and ctx) before answering "unknown".
func (e *Engine) TopicForPeer(ctx context.Context, name string) (meta.Topic, bool) {
	if t, ok := e.view.Topic(name); ok {
		return t, true
	}
	ctx, cancel := context.WithTimeout(ctx, peerTopicWait)
	defer cancel()
	return e.awaitView(ctx, name)
}

// awaitView reads topic name from the view until it is there or ctx ends, reading again
// after each entry this replica's metastore applies.
func (e *Engine) awaitView(ctx context.Context, name string) (meta.Topic, bool) {
	for {
		next := e.meta.NextApply()
		if t, ok := e.view.Topic(name); ok {
			return t, true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return meta.Topic{}, false
		}
	}
}
