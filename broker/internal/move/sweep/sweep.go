// Package sweep is the stale-copy sweep (docs/internals/moves.md §9): the move runner calls Sweep on
// its first tick and every 30th after, and it reclaims the partition copies that moves left on
// this node's disk without ever deleting data on the strength of the local replica alone
// (docs/internals/metastore.md §13). A partition copy of a live topic that this node no longer owns and is
// not the target of is judged against its owner's transfer listing: removed when the owner
// vouches for it, quarantined for an operator otherwise (copy.go).
//
// A deleted topic's data is not its business: a topic directory whose marker names an
// incarnation the replica no longer knows, a marker-less directory of an unknown topic and
// every .stale/<topic>@<incarnation> directory belong to the engine's orphan sweep (at boot and
// every 5 minutes), which also keeps narad_orphan_topic_dirs. This sweep skips them, so each
// kind of leftover has one remover on one schedule (the table is in package datadir's doc).
//
// Every destructive step runs in the engine under the topic's open guard and re-checks what
// the sweep read; every failure to ask the owner or the leader defers to a later sweep.
package sweep

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// Defaults (docs/internals/moves.md §16).
const (
	// DefaultLegacyMarkerGrace: an owner marker without durable_at_ms comes from an older
	// destination whose copy may still sit in its page cache; the copy here is left alone
	// until the install is this old.
	DefaultLegacyMarkerGrace = 5 * time.Minute
	// DefaultCallTimeout bounds one owner listing or leader-confirmed read.
	DefaultCallTimeout = 5 * time.Second
)

// FaultBeforeAct fires after a decision, before the engine acts on it.
const FaultBeforeAct = "sweep.before_act"

// Store is what the sweep reads from the metastore (*meta.Store satisfies it). Topic,
// Assignment and Member are local-replica reads; ConfirmAssignment is a leader-confirmed read
// (an error means unconfirmed; found=false with a nil error means authoritatively absent).
type Store interface {
	AppliedCaughtUp() bool
	Topic(name string) (meta.Topic, bool)
	Assignment(topic string, partition int) (meta.Assignment, bool)
	Member(id string) (meta.Member, bool)
	ConfirmAssignment(ctx context.Context, topic string, partition int) (meta.Assignment, bool, error)
}

var _ Store = (*meta.Store)(nil)

// Engine holds the guarded filesystem steps (*engine.Engine implements them). Each runs under
// the topic's open guard with the partition's log closed and re-checks, under the guard, that
// the local replica does not give the partition to this node and that the topic dir's marker
// is absent or names incarnation; a refused re-check returns an error and changes nothing.
// Removing a deleted topic's directories is the engine's own orphan sweep, not a step here.
type Engine interface {
	// PartitionDir returns <data>/topics/<topic>/pNNNNN.
	PartitionDir(topic string, partition int) string
	// SetAsideCopy quarantines the copy without recovering it when it holds unexpired
	// records, else removes it; it returns the quarantine path ("" when removed).
	SetAsideCopy(topic string, partition int, incarnation string, retentionMs int64) (string, error)
	// ReclaimCopy removes a copy without unexpired records; otherwise it recovers the copy and
	// removes it when its next offset ≤ vouched, quarantines it when ahead (or unrecoverable).
	// It returns the quarantine path ("" when removed) and the recovered next offset (-1:
	// not recovered).
	ReclaimCopy(topic string, partition int, incarnation string, retentionMs, vouched int64) (string, int64, error)
}

// Config configures a Sweeper. Required: NodeID, DataDir, Store, Source, Engine.
type Config struct {
	NodeID  string
	DataDir string // <data_dir>: topics/ lives under it
	Store   Store
	Source  transfer.Source // owner listings (op 22)
	Engine  Engine
	// Logger receives one line per decision; nil discards.
	Logger *slog.Logger
	// Now is the wall clock of the retention and legacy-marker rules; nil → time.Now.
	Now               func() time.Time
	LegacyMarkerGrace time.Duration // 0 → DefaultLegacyMarkerGrace
	CallTimeout       time.Duration // 0 → DefaultCallTimeout
}

// Sweeper runs the stale-copy sweep. Sweep is not safe for concurrent use with itself (the
// runner calls it from its one loop).
type Sweeper struct {
	cfg  Config
	dirs datadir.Layout
	log  *slog.Logger
}

// New returns a Sweeper for cfg.
func New(cfg Config) *Sweeper {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LegacyMarkerGrace <= 0 {
		cfg.LegacyMarkerGrace = DefaultLegacyMarkerGrace
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	return &Sweeper{cfg: cfg, dirs: datadir.New(cfg.DataDir), log: cfg.Logger}
}

// Sweep runs one pass over the data dir. It does nothing while the replica is not caught up
// (deferring is free). Copies it cannot judge yet (owner or leader unreachable, local copy
// unlistable) are left for a later pass without an error; the returned error reports only a
// data dir that cannot be listed or a cancelled ctx.
func (s *Sweeper) Sweep(ctx context.Context) error {
	if !s.cfg.Store.AppliedCaughtUp() {
		return nil
	}
	ents, err := os.ReadDir(s.dirs.Topics())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, ent := range ents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name, ok := datadir.ParseTopicDirName(ent.Name())
		if !ent.IsDir() || !ok {
			continue
		}
		s.sweepTopicDir(ctx, name)
	}
	return ctx.Err()
}

// sweepTopicDir judges the partition copies under topics/<name> when the directory belongs
// to the live incarnation (or, marker-less, to a live topic from before incarnation ids).
func (s *Sweeper) sweepTopicDir(ctx context.Context, name string) {
	dir := s.dirs.TopicDir(name)
	marker, hasMarker, err := datadir.ReadIncarnation(dir)
	if err != nil {
		s.log.Debug("sweep: topic dir marker unreadable; deferring", "topic", name, "err", err)
		return
	}
	// The incarnation is read from the replica FIRST, ownership after (docs/internals/moves.md §9.1).
	t, known := s.cfg.Store.Topic(name)
	if !known || (hasMarker && t.Incarnation != marker) {
		return // a deleted topic's data: the engine's orphan sweep owns it
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		s.log.Debug("sweep: topic dir unlistable; deferring", "topic", name, "err", err)
		return
	}
	for _, ent := range ents {
		if ctx.Err() != nil {
			return
		}
		if p, ok := datadir.ParsePartitionDirName(ent.Name()); ok && ent.IsDir() {
			s.sweepCopy(ctx, t, p)
		}
	}
}

// callCtx bounds one remote call.
func (s *Sweeper) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.CallTimeout)
}
