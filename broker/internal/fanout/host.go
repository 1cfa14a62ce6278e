package fanout

import (
	"context"

	plog "narad.dev/broker/internal/log"
)

// Desired is one cursor the local replica wants on this node: a link (parent → child at an
// attach epoch) × one parent partition this node owns.
type Desired struct {
	Parent    string
	Partition int // parent partition index
	Child     string
	Epoch     string // attach epoch of the link (16 hex chars)
	// AttachOffsets is the link's attach point per parent partition (index = partition); nil for
	// a link attached before attach offsets existed (legacy: tail at first read).
	AttachOffsets []int64
	DelayMs       int64  // fan-out delay of the child; immutable per epoch
	Dir           string // the parent partition's directory (holds the cursor file, cursorfile.Path)
	// Remote is set for a remote link (Child is then its id, remote:<topic>@<host:port>): the
	// slab goes to the target cluster's batch produce instead of child partitions.
	Remote *RemoteTarget
}

// key identifies a running cursor. A re-attach changes the epoch, hence the key (docs/internals/fanout.md §4 item 1).
type key struct {
	parent    string
	partition int
	child     string
	epoch     string
	delayMs   int64
}

// slot identifies a cursor file: at most one cursor per slot runs at a time.
type slot struct {
	parent    string
	partition int
	child     string
}

func (d Desired) key() key {
	return key{parent: d.Parent, partition: d.Partition, child: d.Child, epoch: d.Epoch, delayMs: d.DelayMs}
}

func (k key) slot() slot { return slot{parent: k.parent, partition: k.partition, child: k.child} }

// PartitionDir is one parent partition this node owns, for the orphan cursor-file sweep.
type PartitionDir struct {
	Topic     string
	Partition int
	Dir       string
}

// Host is what the fan-out engine needs from the node. The engine implements it.
//
// Concurrency: every method may be called concurrently from the Runner goroutine and from any
// cursor goroutine. Only CommitChild and LeaderLink may block (they take a context); the other
// methods read the local replica or the local log registry and must return promptly.
type Host interface {
	// DesiredCursors returns every link in the local replica × every parent partition this node
	// owns. complete is false when the set could not be fully computed (e.g. partition
	// ownership unreadable); the Runner then starts what it got, stops nothing, and forces a
	// full pass on the next tick.
	DesiredCursors() (ds []Desired, complete bool)
	// LatestDomainVersion is the newest version among the replica's topics, assignments,
	// schemas, users and routing members (not heartbeats, not drain flags). The Runner skips a
	// pass while it is unchanged (docs/internals/fanout.md §4 item 4).
	LatestDomainVersion() uint64
	// CaughtUp reports the replica's AppliedCaughtUp (docs/internals/metastore.md §9). Cursors start only
	// while it is true.
	CaughtUp() bool
	// ParentLog returns the open local log of parent partition p (opening it if needed; the
	// engine's registry get). An error stops the cursor; the Runner restarts it if still desired.
	// A returned log may later be closed by idle eviction: its reads then return
	// plog.ErrClosed and the cursor calls ParentLog again only when there is backlog.
	ParentLog(parent string, p int) (ParentLog, error)
	// ChildPartitions returns the child's current partition count in the local replica; ok is
	// false when the child topic is gone.
	ChildPartitions(child string) (n int, ok bool)
	// ParentPartitions returns the parent's current partition count in the local replica (used
	// only for a slab holding a keyless record).
	ParentPartitions(parent string) int
	// LinkCurrent reports whether the local replica still links child to parent at epoch.
	LinkCurrent(parent, child, epoch string) bool
	// LeaderLink is a leader-confirmed read of the child's link (docs/internals/metastore.md §9; a node that is
	// itself the leader passes a barrier first): attached is true when the leader's child record
	// has this parent, and epoch is then its attach epoch. err means the answer could not be
	// confirmed; the caller defers (anchors nothing, deletes nothing).
	LeaderLink(ctx context.Context, parent, child string) (epoch string, attached bool, err error)
	// CommitChild commits entries, in order, to child partition p (locally or by RPC to its
	// owner), returning only once they are durable (the produce commit: fsync + verify). The
	// Runner bounds ctx with CommitTimeout. Entries alias the parent log's buffers: the callee
	// copies what it keeps and never modifies them.
	CommitChild(ctx context.Context, child string, p int, entries []plog.Entry) error
	// OwnedPartitionDirs lists every partition directory of every topic this node owns, for
	// the orphan cursor-file sweep.
	OwnedPartitionDirs() []PartitionDir
}

// ParentLog is the part of a partition log a cursor reads. *plog.Log implements it.
type ParentLog interface {
	// ReadDue reads consecutive records from from (see plog.Log.ReadDue).
	ReadDue(from int64, maxRecords, maxBytes int, maxCommittedAt int64) (recs []plog.Record, notDueAt int64, err error)
	HighWatermark() int64
	OldestOffset() int64
	// NotifyC is closed when the log commits (or closes); take it before reading.
	NotifyC() <-chan struct{}
}

// Observer receives the fan-out metrics (docs/internals/fanout.md §9, docs/internals/metrics.md §4). Calls come from cursor
// goroutines concurrently; they must be fast and must not call back into the Runner.
type Observer interface {
	// Lag sets narad_fanout_lag_messages{parent,child,partition} = parent HWM − next_offset.
	Lag(parent, child string, partition int, msgs int64)
	// DueLag sets narad_fanout_due_lag_seconds{parent,child,partition} (delay children only).
	DueLag(parent, child string, partition int, seconds float64)
	// Dropped adds to narad_fanout_child_dropped_messages{parent,child}: drop-behind and
	// unreadable parent records, counted once, after the cursor durably advanced past them.
	Dropped(parent, child string, n int64)
	// CursorCorrupt counts narad_errors_total{component="fanout",kind="cursor_corrupt"}.
	CursorCorrupt(parent, child string, partition int)
	// Forget deletes the cursor's Lag and DueLag series; called when the cursor stops.
	Forget(parent, child string, partition int)
}

// StartObserver is optionally implemented by an Observer: CursorStarted is called when a
// cursor started (before its first slab), so the link's counters exist at zero from the
// attach on. remote says whether the link is a remote one.
type StartObserver interface {
	CursorStarted(parent, child string, partition int, remote bool)
}

type nopObserver struct{}

func (nopObserver) Lag(string, string, int, int64)      {}
func (nopObserver) DueLag(string, string, int, float64) {}
func (nopObserver) Dropped(string, string, int64)       {}
func (nopObserver) CursorCorrupt(string, string, int)   {}
func (nopObserver) Forget(string, string, int)          {}
