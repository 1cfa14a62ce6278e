// Package source is the source side of a partition move (docs/internals/moves.md §3, §4): what
// the partition's current owner answers to the destination's node RPCs. It arms, re-arms and
// fences the handoff freeze (op 24, handoff.go), lists a partition for transfer, open or closed
// (op 22, transfer.go: consumer positions, verified fan-out cursor files, HWM, segments, move
// marker), and reads committed segment bytes in chunks (op 23 and its stream). The destination
// side is package move.
//
// Everything it needs from the node comes in Deps: the partition registry (package
// partition: open logs, the freeze state, the produce lock, the closed-log lister and the
// data-directory layout) and the local replica's topic records and ownership. It knows
// nothing of the engine, HTTP or the metastore's writes.
//
// Invariants:
//
//   - Every operation answers only on the owner: ErrNotOwner otherwise, ErrTopicGone with
//     ErrNotFound for a topic or partition the local replica lacks (errcode's sentinels, which
//     transfer's names alias); any other failure wraps errcode.ErrUnavailable.
//   - Lock order: a partition's produce lock (LockCommits) → its shard's lock, as in package
//     partition; a closed partition is read only under its topic's open guard held shared.
//   - Nothing listed or read is past the committed boundary, and the listing reads positions
//     before the HWM and the HWM before the segments (docs/internals/moves.md §4.1 rule 1).
//   - A token never creates a freeze; a failed arm lifts the freeze it created.
package source

import (
	"log/slog"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
)

// Deps is what the source side needs from its node.
type Deps struct {
	// Parts is the node's partition registry.
	Parts *partition.Registry
	// Topic reads a topic record from the local replica.
	Topic func(name string) (meta.Topic, bool)
	// Owns reports whether the local replica says this node owns (topic, p).
	Owns   func(topic string, p int) bool
	Logger *slog.Logger
}

// Source serves the source side of moves for one node. All methods are safe for concurrent
// use.
type Source struct {
	parts *partition.Registry
	topic func(string) (meta.Topic, bool)
	owns  func(string, int) bool
	log   *slog.Logger
}

// New returns the source side over d; a nil Logger logs nowhere.
func New(d Deps) *Source {
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{parts: d.Parts, topic: d.Topic, owns: d.Owns, log: log}
}
