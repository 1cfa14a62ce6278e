package fanout

import (
	"context"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
)

// Node is what only the engine has, the narrow side of the host boundary: its replica view of
// topics and ownership, the partition registry (open logs, their directories, their high
// watermarks) and the produce commit path. NodeHost and Links build every fan-out decision on
// it; the engine implements it with a thin adapter.
//
// Concurrency: every method may be called concurrently. Only CommitChild blocks (it takes a
// context); the others read the local replica or the local registry and return promptly.
type Node interface {
	// Topic reads one topic from the local replica.
	Topic(name string) (meta.Topic, bool)
	// Topics lists every topic in the local replica.
	Topics() []meta.Topic
	// OwnedPartitions lists the partitions of t this node owns.
	OwnedPartitions(t meta.Topic) []int
	// Owner says who serves topic's partition p, from the local replica.
	Owner(topic string, p int) Owner
	// PartitionDir is the directory of topic's partition p (it may not exist).
	PartitionDir(topic string, p int) string
	// OwnedLog returns the open log of t's partition p, which this node must own
	// (errcode.ErrNotOwner otherwise), opening it if it is closed.
	OwnedLog(t meta.Topic, p int) (*plog.Log, error)
	// PeekHighWatermark is the committed high watermark of t's partition p without opening
	// its log: an open log's from memory, a closed one's from its directory; known is false
	// when the directory holds no exact boundary.
	PeekHighWatermark(t meta.Topic, p int) (hwm int64, known bool)
	// ExactHighWatermark is the committed HWM of a partition this node owns, opening its log if
	// it is closed (the attach point).
	ExactHighWatermark(t meta.Topic, p int) (int64, error)
	// ExactStartPoint is the start point of a partition this node owns, opening its log if it
	// is closed (a remote link's start).
	ExactStartPoint(t meta.Topic, p int) (StartPoint, error)
	// CommitChild commits entries to child's partition p through the produce commit path
	// (fsync + verify), on this node or on the partition's owner; it never reroutes.
	CommitChild(ctx context.Context, child meta.Topic, p int, entries []plog.Entry) error
}

// Owner describes who serves a partition, from the local replica.
type Owner struct {
	ID    string
	Addr  string // cluster address; "" for this node
	Local bool
	Dead  bool // member record dead or missing
	Known bool // the partition has an assignment
}

// Metastore is the part of the metadata store fan-out reads and proposes to (*meta.Store).
type Metastore interface {
	LatestDomainVersion() uint64
	AppliedCaughtUp() bool
	WaitCaughtUp(ctx context.Context) error
	ConfirmTopic(ctx context.Context, name string) (meta.Topic, bool, error)
	RemoteLinks(parent string) []meta.RemoteLink
	AllRemoteLinks() []meta.RemoteLink
	AttachChild(ctx context.Context, parent, child, epoch string, delayMs int64, offsets []int64) error
	AttachRemote(ctx context.Context, l meta.RemoteLink) (meta.Topic, error)
	DetachRemote(ctx context.Context, parent, id string) error
	ResealRemote(ctx context.Context, parent, id, epoch, sealed string) error
}

var _ Metastore = (*meta.Store)(nil)

// Peers is the node RPC fan-out asks other nodes through (addr is a peer's cluster address).
type Peers interface {
	// ExactHighWatermark asks a partition's owner for its committed HWM (op 8, exact).
	ExactHighWatermark(ctx context.Context, addr, topic string, partition int) (int64, error)
	// FanoutCursors runs op 17 on the owner of a parent partition.
	FanoutCursors(ctx context.Context, addr, parent string, partition int) (PartitionCursors, error)
}

// StartPointPeers is the peer call behind a remote link's start point (op 8, exact mode),
// optionally implemented by Peers.
type StartPointPeers interface {
	ExactStartPoint(ctx context.Context, addr, topic string, partition int) (StartPoint, error)
}

// StartPoint is what the owner of a parent partition reports for a remote link's start:
// committed HWM, oldest retained offset and the next offset after the consumer frontier.
type StartPoint struct {
	HighWatermark int64
	Oldest        int64
	Frontier      int64 // first offset the consumers have not resolved (≥ Oldest)
}

// PartitionCursors is what an owner reports about one parent partition's cursors (op 17).
type PartitionCursors struct {
	HighWatermark int64
	HWMKnown      bool // false: a closed partition without a durable boundary
	Cursors       []CursorReport
}

// CursorReport is one cursor's durable position as its file records it.
type CursorReport struct {
	Child         string
	Epoch         string
	NextOffset    int64
	Stalled       bool
	DueLagSeconds float64
	RemoteState   string // remote links: the running cursor's state ("" when none runs)
	LastError     string // remote links: the running cursor's last send error
}

// Status is the fan-out runner's live view of the cursors it runs (*Runner).
type Status interface {
	CursorStatus(parent string, partition int, child string) (stalled bool, dueLagSeconds float64)
	RemoteStatus(parent string, partition int, id string) (state, lastErr string, ok bool)
}

var _ Status = (*Runner)(nil)
