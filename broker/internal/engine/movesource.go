package engine

import (
	"context"

	"narad.dev/broker/internal/move/source"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/transfer"
)

// The source side of partition moves lives in package move/source (docs/internals/moves.md §3,
// §4); the engine builds it over its partition registry and replica view and keeps the entry
// points noderpc's MoveSource calls (ops 22–24), each a delegation.

// ErrFrozen: the partition is frozen for a move's handoff (docs/internals/moves.md §3); it is
// partition.ErrFrozen, kept here for the engine's callers.
var ErrFrozen = partition.ErrFrozen

// Fault points of the handoff freeze (faults.Check), so tests can interleave a commit with an
// arm (MV-6, MV-7) and crash tests can stop a source at these points.
const (
	// FaultHandoffBeforeLock is source.FaultHandoffBeforeLock: it fires in PrepareHandoff's
	// arm after the lease drain, before the produce lock is taken; an error there lifts the
	// new freeze and fails the arm.
	FaultHandoffBeforeLock = source.FaultHandoffBeforeLock
	// FaultCommitAfterGate is partition.FaultCommitAfterGate: it fires in the produce gate
	// after the first freeze gate, before the produce lock.
	FaultCommitAfterGate = partition.FaultCommitAfterGate
)

// newMoveSource builds the engine's move source over its registry and replica view.
func newMoveSource(e *Engine) *source.Source {
	return source.New(source.Deps{Parts: e.parts, Topic: e.view.Topic, Owns: e.owns, Logger: e.log})
}

// PrepareHandoff arms, re-arms or fences the handoff freeze of (topic, p) on its owner (node
// RPC op 24); see source.Source.PrepareHandoff.
func (e *Engine) PrepareHandoff(ctx context.Context, topic string, p int, req transfer.PrepareRequest) (transfer.Listing, error) {
	return e.src.PrepareHandoff(ctx, topic, p, req)
}

// TransferListing is the owner's transfer listing of (topic, p) (node RPC op 22); see
// source.Source.TransferListing.
func (e *Engine) TransferListing(ctx context.Context, topic string, p int) (transfer.Listing, error) {
	return e.src.TransferListing(ctx, topic, p)
}

// FetchSegmentChunk reads up to n committed bytes of segment base of (topic, p) into a new
// slice (node RPC op 23); see source.Source.FetchSegmentChunk.
func (e *Engine) FetchSegmentChunk(ctx context.Context, topic string, p int, base, at int64, n int) ([]byte, error) {
	return e.src.FetchSegmentChunk(ctx, topic, p, base, at, n)
}

// ReadSegmentChunk reads committed bytes of segment base of (topic, p) into buf (op 23 and its
// stream); see source.Source.ReadSegmentChunk.
func (e *Engine) ReadSegmentChunk(ctx context.Context, topic string, p int, base, at int64, buf []byte) (int, error) {
	return e.src.ReadSegmentChunk(ctx, topic, p, base, at, buf)
}
