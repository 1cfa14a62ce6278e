// Package sweep is the stale-copy sweep (spec/moves.md §9): the move runner calls Sweep on
// its first tick and every 30th after, and it reclaims what moves and topic deletes left on
// this node's disk without ever deleting data on the strength of the local replica alone
// (spec/cluster.md §9):
//
//   - a partition copy this node no longer owns and is not the target of is judged against
//     its owner's transfer listing: removed when the owner vouches for it, quarantined for an
//     operator otherwise (copy.go);
//   - a topic directory whose marker names an incarnation the replica no longer knows, and a
//     .stale/<topic>@<incarnation> directory, are removed once the leader confirms that
//     incarnation gone (topics.go);
//   - a topic directory without a marker whose topic is unknown is only counted
//     (narad_orphan_topic_dirs): removing it is the startup sweep's job.
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
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/transfer"
)

// Defaults (spec/moves.md §16).
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
// Assignment and Member are local-replica reads; ConfirmTopic and ConfirmAssignment are
// leader-confirmed reads (an error means unconfirmed; found=false with a nil error means
// authoritatively absent).
type Store interface {
	AppliedCaughtUp() bool
	Topic(name string) (meta.Topic, bool)
	Assignment(topic string, partition int) (meta.Assignment, bool)
	Member(id string) (meta.Member, bool)
	ConfirmTopic(ctx context.Context, name string) (meta.Topic, bool, error)
	ConfirmAssignment(ctx context.Context, topic string, partition int) (meta.Assignment, bool, error)
}

var _ Store = (*meta.Store)(nil)

// Engine holds the guarded filesystem steps (*engine.Engine implements them). Each runs under
// the topic's open guard with the partition's log closed and re-checks, under the guard, that
// the local replica does not give the partition to this node and that the topic dir's marker
// is absent or names incarnation; a refused re-check returns an error and changes nothing.
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
	// RemoveDeletedTopicDir removes topics/<topic> whose marker names incarnation, re-checking
	// that the marker is unchanged and the local record absent or another incarnation.
	RemoveDeletedTopicDir(topic, incarnation string) (bool, error)
	// RemoveStaleDir removes .stale/<topic>@<incarnation> unless the local record names it.
	RemoveStaleDir(topic, incarnation string) (bool, error)
}

// Config configures a Sweeper. Required: NodeID, DataDir, Store, Source, Engine.
type Config struct {
	NodeID  string
	DataDir string // <data_dir>: topics/ and .stale/ live under it
	Store   Store
	Source  transfer.Source // owner listings (op 22)
	Engine  Engine
	// Metrics receives narad_orphan_topic_dirs; nil exports nothing.
	Metrics *metrics.Metrics
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
	orphans := 0
	for _, ent := range ents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name, ok := datadir.ParseTopicDirName(ent.Name())
		if !ent.IsDir() || !ok {
			continue
		}
		if s.sweepTopicDir(ctx, name) {
			orphans++
		}
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.OrphanTopicDirs.Set(float64(orphans))
	}
	if err := s.sweepStale(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

// sweepTopicDir handles topics/<name>; it reports whether the dir is a marker-less orphan.
func (s *Sweeper) sweepTopicDir(ctx context.Context, name string) (orphan bool) {
	dir := s.dirs.TopicDir(name)
	marker, hasMarker, err := datadir.ReadIncarnation(dir)
	if err != nil {
		s.log.Debug("sweep: topic dir marker unreadable; deferring", "topic", name, "err", err)
		return false
	}
	// The incarnation is read from the replica FIRST, ownership after (spec/moves.md §9.1).
	t, known := s.cfg.Store.Topic(name)
	switch {
	case !known && !hasMarker:
		return true // only the startup sweep removes marker-less dirs
	case hasMarker && (!known || t.Incarnation != marker):
		s.sweepDeletedTopicDir(ctx, name, marker)
		return false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		s.log.Debug("sweep: topic dir unlistable; deferring", "topic", name, "err", err)
		return false
	}
	for _, ent := range ents {
		if ctx.Err() != nil {
			return false
		}
		if p, ok := datadir.ParsePartitionDirName(ent.Name()); ok && ent.IsDir() {
			s.sweepCopy(ctx, t, p)
		}
	}
	return false
}

// callCtx bounds one remote call.
func (s *Sweeper) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.CallTimeout)
}
