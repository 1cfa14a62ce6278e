package transfer

import (
	"context"
	"errors"
)

// Source is a move destination's view of the source's transfer endpoints (node RPC ops 22–24),
// implemented by the server over the cluster port. addr is the source's cluster address.
// Errors wrap the sentinels of this package: ErrNotOwner (421), ErrNotFound (404), the fence
// refusals (409) and ErrUnavailable (503, timeouts, transport failures).
type Source interface {
	// List returns the transfer listing (op 22). The returned Listing has ReceivedAt set.
	List(ctx context.Context, addr, topic string, partition int) (Listing, error)
	// Fetch reads up to n (≤ ChunkBytes) committed bytes of segment base from position at
	// (op 23). A short or empty read is normal at the end of the committed bytes.
	Fetch(ctx context.Context, addr, topic string, partition int, base, at int64, n int) ([]byte, error)
	// Stream opens a stream of the committed bytes of segment base from position at on, up
	// to n bytes in all, in chunks of at most chunk (≤ ChunkBytes) bytes (op 23 streamed): see
	// SegmentStream. A source that predates the stream fails the stream's first Recv with
	// ErrStreamUnsupported; the destination then uses Fetch.
	Stream(ctx context.Context, addr, topic string, partition int, base, at, n int64, chunk int) (SegmentStream, error)
	// Prepare arms, re-arms or fences the handoff freeze (op 24, docs/internals/moves.md §3.3). An arm
	// returns the full listing read under the source's produce lock plus Token; a re-arm or
	// fence returns Token, HighWatermark and ExpiresInMs only.
	Prepare(ctx context.Context, addr, topic string, partition int, req PrepareRequest) (Listing, error)
}

// SegmentStream is an open segment stream. Recv reads the next chunk into buf, which must
// hold the stream's chunk size, and returns its length; io.EOF once the source has sent
// everything it will: all n bytes, or fewer when it reached its committed boundary (normal,
// as a short Fetch). Errors are those of Fetch. Close ends the stream (always call it).
type SegmentStream interface {
	Recv(buf []byte) (int, error)
	Close()
}

// ErrStreamUnsupported: the source does not serve the segment stream (an older release).
var ErrStreamUnsupported = errors.New("source does not serve the segment stream")

// Local is what a move destination needs from its own node's engine (docs/internals/moves.md §5.2, §5.9, §7). Every method that acts on a partition path runs under the topic's open guard
// (docs/internals/storage-format.md §18) with the partition's log closed.
type Local interface {
	// PartitionDir returns <data>/topics/<topic>/pNNNNN (datadir.Layout.PartitionDir).
	PartitionDir(topic string, partition int) string
	// StagingDir returns <data>/.moves/<topic>-<partition> (datadir.Layout.StagingDir; not
	// created).
	StagingDir(topic string, partition int) string
	// PrepareTopicDir readies topics/<topic> for incarnation (docs/internals/moves.md §5.2): under the topic
	// open guard it re-reads the topic record and refuses with ErrIncarnationChanged unless
	// it still names incarnation; a directory whose marker names another incarnation is set
	// aside to .stale/<topic>@<old>; the marker is stamped if absent.
	PrepareTopicDir(topic, incarnation string) error
	// Install renames the staged copy into the partition path (docs/internals/moves.md §5.9): refused with
	// ErrIncarnationChanged unless .incarnation still names incarnation; a copy already at the
	// path is quarantined to pNNNNN.quarantine when it holds unexpired records (error log),
	// removed when it holds none; consumer state is dropped before and after the rename;
	// the directories renamed into are fsynced.
	Install(topic string, partition int, incarnation, staging string) error
	// RenameBack takes an install off the partition path back to staging (docs/internals/moves.md §7),
	// only while .incarnation names incarnation and the path's move.marker is byte for byte
	// marker (the install this worker made); otherwise ErrNotInstalled and nothing moves.
	RenameBack(topic string, partition int, incarnation, staging string, marker []byte) error
	// DropConsumerState closes the partition's log and consume shard if this node has them
	// open (state from an earlier ownership), so no ack of old state reaches a new copy.
	DropConsumerState(topic string, partition int)
}

// Errors of Local.
var (
	// ErrIncarnationChanged: the topic was deleted (and maybe recreated) under the move.
	ErrIncarnationChanged = errors.New("topic incarnation changed")
	// ErrNotInstalled: the partition path does not hold this worker's install.
	ErrNotInstalled = errors.New("partition path does not hold this install")
)
