package dispatch

import (
	"context"
	"time"

	"narad.dev/broker/internal/wal"
)

// DestKind says how a partition's owner is reached.
type DestKind int

const (
	// DestLocal: this node owns the partition; commit with a local call.
	DestLocal DestKind = iota
	// DestRemote: another live node owns it; commit with the CommitProduceBatch RPC to Addr.
	DestRemote
	// DestDeadOwner: the owner member is marked dead; the dispatcher reroutes at once (§4.2).
	DestDeadOwner
)

// String returns the kind's log name.
func (k DestKind) String() string {
	switch k {
	case DestLocal:
		return "local"
	case DestRemote:
		return "remote"
	case DestDeadOwner:
		return "dead_owner"
	}
	return "unknown"
}

// Destination is where one partition's commits go.
type Destination struct {
	Kind DestKind
	Node string // owner node id
	Addr string // owner cluster address (DestRemote)
}

// Topology is the dispatcher's read-only view of the local metadata replica plus the one
// leader-confirmed read the discard path needs.
//
// Concurrency contract: every method is called only from the goroutine running Dispatcher.Run,
// never concurrently with itself, but concurrently with the rest of the node (metadata applies),
// so implementations must be safe for that. Partitions, Destination and CaughtUp read local
// state and must not block on I/O; ConfirmAbsent may block but must honour ctx.
type Topology interface {
	// Partitions returns the topic's partition count if the local replica holds topic with
	// this incarnation (incarnation "" = unknown, matches any); ok=false if absent or another
	// incarnation.
	Partitions(topic, incarnation string) (n int, ok bool)
	// Destination resolves the owner of topic's partition (0 ≤ partition < n).
	Destination(topic string, partition int) Destination
	// CaughtUp reports whether the local replica has applied everything the leader committed
	// (AppliedCaughtUp); the discard path is closed otherwise.
	CaughtUp() bool
	// ConfirmAbsent asks the Raft leader (leader-confirmed read, docs/internals/metastore.md §9) whether topic
	// with this incarnation is gone (deleted, or recreated as another incarnation). Any failure →
	// (false, err): the records are kept.
	ConfirmAbsent(ctx context.Context, topic, incarnation string) (bool, error)
}

// Committer delivers records to partition owners.
//
// Concurrency contract: Commit is called from up to Options.CommitFanout goroutines at once,
// but never concurrently for the same (topic, partition). It must honour ctx (the dispatcher
// bounds it with Options.CommitTimeout). recs is valid only during the call and its payloads are
// read-only (they share memory with the WAL): copy what must outlive the call.
type Committer interface {
	// Commit durably commits recs (all for one partition, WAL order) at dest, into partition
	// (which may differ from recs[i].Partition after a reroute). nil only after the owner's
	// verified commit. Errors: anything → the destination is stuck (retry ≥ 1 s later).
	Commit(ctx context.Context, dest Destination, topic string, partition int, recs []wal.Record) error
}

// Observer receives dispatcher measurements; it may be nil. Calls come from the Run goroutine.
type Observer interface {
	// ObserveDiscard counts one record discarded for a deleted topic (narad_errors_total
	// {component="ingress",kind="discard_deleted_topic"}).
	ObserveDiscard(topic string)
	// ObservePass reports every pass, idle ones included (Undispatched feeds the
	// narad_ingress_undispatched_records gauge).
	ObservePass(p PassStats)
}

// PassStats summarizes one dispatcher pass.
type PassStats struct {
	Duration     time.Duration
	Window       int    // window size used by this pass
	Scanned      int    // unfinished records read from the WAL
	Committed    int    // records whose commit succeeded
	Rerouted     int    // of those, records committed to a sibling partition
	Discarded    int    // records dropped by the discard path
	Waiting      int    // records left for a later pass (stuck, failed or unconfirmed)
	Checkpoint   uint64 // WAL checkpoint after the pass
	Undispatched uint64 // backlog after the pass (§2.6)
}
