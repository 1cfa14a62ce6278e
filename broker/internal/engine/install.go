package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

// Fault points of the destination's local move steps.
const (
	// FaultInstallBeforeRename fires after an earlier copy at the path was set aside and
	// before the staged copy is renamed into the partition path.
	FaultInstallBeforeRename = "engine.install_before_rename"
	// FaultInstallAfterRename fires after the rename into the partition path, before the
	// directories are fsynced.
	FaultInstallAfterRename = "engine.install_after_rename"
	// FaultRenameBack fires after a rename back passed its checks, before it moves anything.
	FaultRenameBack = "engine.rename_back_before_rename"
)

var _ transfer.Local = (*Engine)(nil)

// PartitionDir implements transfer.Local: <data>/topics/<topic>/pNNNNN.
func (e *Engine) PartitionDir(topic string, partition int) string {
	return e.parts.PartitionDir(topic, partition)
}

// StagingDir implements transfer.Local: <data>/.moves/<topic>-<partition>, on the data dir's
// filesystem so the install is a rename.
func (e *Engine) StagingDir(topic string, partition int) string {
	return e.layout().StagingDir(topic, partition)
}

// PrepareTopicDir implements transfer.Local (docs/internals/moves.md §5.2). Under the topic open guard
// it re-reads the topic record from the local replica and refuses with
// transfer.ErrIncarnationChanged unless it still names incarnation: a delete and recreate
// between the worker's read and the guard must not set the successor's live directory aside
// as a deleted incarnation's. A directory whose marker names another incarnation is set aside
// to .stale/<topic>@<old>; the marker is stamped if absent.
func (e *Engine) PrepareTopicDir(topic, incarnation string) error {
	r := e.parts
	g := r.Guard(topic)
	g.Lock()
	defer g.Unlock()
	t, ok := e.meta.Topic(topic)
	if !ok || t.Incarnation != incarnation {
		return fmt.Errorf("prepare %s for incarnation %s: %w", topic, incarnation, transfer.ErrIncarnationChanged)
	}
	// Logs of another incarnation still registered point into the directory about to be set
	// aside: close them first (docs/internals/storage-format.md §18).
	for _, pt := range r.Snapshot() {
		if pt.Topic() == topic && pt.Incarnation() != incarnation {
			r.ClosePartition(pt)
		}
	}
	return r.PrepareTopicDir(t)
}

// Install implements transfer.Local (docs/internals/moves.md §5.9). Under the topic open guard with the
// partition's log closed: the topic dir's marker must still name incarnation (a topic without
// an incarnation id skips the check); a copy already at the partition path — this node's own
// copy from an earlier ownership that the stale-copy sweep has not judged — is quarantined
// when it holds unexpired records (comparing it with the incoming copy proves nothing: after
// a force-promote away from this node it may hold other records at the same offsets) and
// removed otherwise; then staging is renamed into the path and the directories are fsynced.
// Consumer state is dropped before and after the rename.
func (e *Engine) Install(topic string, partition int, incarnation, staging string) error {
	r := e.parts
	g := r.Guard(topic)
	g.Lock()
	defer g.Unlock()
	topicDir := r.TopicDir(topic)
	if err := checkIncarnation(topicDir, incarnation); err != nil {
		return fmt.Errorf("install %s/%d: %w", topic, partition, err)
	}
	if _, err := os.Stat(staging); err != nil {
		return fmt.Errorf("install %s/%d: staged copy: %w", topic, partition, err)
	}
	r.DropOpen(topic, partition)
	path := r.PartitionDir(topic, partition)
	if err := e.clearPathForInstall(topic, partition, incarnation, path); err != nil {
		return fmt.Errorf("install %s/%d: %w", topic, partition, err)
	}
	if err := faults.Check(FaultInstallBeforeRename); err != nil {
		return err
	}
	if err := durable.MkdirAll(topicDir); err != nil { // fsyncs topics/ if it creates the dir
		return err
	}
	if err := os.Rename(staging, path); err != nil {
		return fmt.Errorf("install %s/%d: %w", topic, partition, err)
	}
	if err := faults.Check(FaultInstallAfterRename); err != nil {
		return err
	}
	if err := durable.SyncDir(topicDir); err != nil {
		return fmt.Errorf("install %s/%d: sync topic dir: %w", topic, partition, err)
	}
	if err := durable.SyncDir(filepath.Dir(staging)); err != nil {
		return fmt.Errorf("install %s/%d: sync staging dir: %w", topic, partition, err)
	}
	r.DropOpen(topic, partition)
	e.log.Info("move: installed the staged copy", "topic", topic, "partition", partition, "path", path)
	return nil
}

// clearPathForInstall sets aside whatever sits at path (the caller holds the guard).
func (e *Engine) clearPathForInstall(topic string, partition int, incarnation, path string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	retention := int64(0) // unknown retention: keep everything (the safe side)
	if t, ok := e.meta.Topic(topic); ok && t.Incarnation == incarnation {
		retention = t.RetentionMs
	}
	u, err := plog.UnexpiredRecords(path, retention, e.now())
	if err != nil {
		return fmt.Errorf("judge the copy already at %s: %w", path, err)
	}
	if !u.Any() {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
		if err := durable.SyncDir(filepath.Dir(path)); err != nil {
			return err
		}
		e.log.Info("move: install removed an earlier copy without unexpired records", "topic", topic,
			"partition", partition, "path", path)
		return nil
	}
	to, err := e.quarantineDir(path)
	if err != nil {
		return err
	}
	e.log.Error("move: install quarantined this node's earlier copy of the partition; an operator must reconcile it",
		"topic", topic, "partition", partition, "path", path, "quarantined_to", to,
		"reason", "unexpired_records", "records", u.Records(), "bytes", u.Bytes)
	return nil
}

// RenameBack implements transfer.Local (docs/internals/moves.md §7): under the topic open guard with
// the log closed, and only while the topic dir's marker names incarnation and the path's
// move.marker is byte for byte marker, it renames the path back to staging (removing a
// leftover staging dir first) and fsyncs both parents. Otherwise nothing moves and the error
// wraps transfer.ErrNotInstalled: the copy went with its incarnation's directory when that was
// set aside, and the stale-copy sweep deals with it.
func (e *Engine) RenameBack(topic string, partition int, incarnation, staging string, marker []byte) error {
	r := e.parts
	g := r.Guard(topic)
	g.Lock()
	defer g.Unlock()
	topicDir := r.TopicDir(topic)
	if err := checkIncarnation(topicDir, incarnation); err != nil {
		return fmt.Errorf("rename back %s/%d: %w: %w", topic, partition, transfer.ErrNotInstalled, err)
	}
	path := r.PartitionDir(topic, partition)
	have, err := transfer.ReadMarkerRaw(path)
	if err != nil {
		return fmt.Errorf("rename back %s/%d: read marker: %w", topic, partition, err)
	}
	if have == nil || len(marker) == 0 || !bytes.Equal(have, marker) {
		return fmt.Errorf("rename back %s/%d: %w", topic, partition, transfer.ErrNotInstalled)
	}
	r.DropOpen(topic, partition)
	if err := faults.Check(FaultRenameBack); err != nil {
		return err
	}
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("rename back %s/%d: remove leftover staging: %w", topic, partition, err)
	}
	if err := durable.MkdirAll(filepath.Dir(staging)); err != nil {
		return err
	}
	if err := os.Rename(path, staging); err != nil {
		return fmt.Errorf("rename back %s/%d: %w", topic, partition, err)
	}
	if err := durable.SyncDir(topicDir); err != nil {
		return err
	}
	if err := durable.SyncDir(filepath.Dir(staging)); err != nil {
		return err
	}
	e.log.Warn("move: took the install off the partition path", "topic", topic, "partition", partition, "staging", staging)
	return nil
}

// DropConsumerState implements transfer.Local: it closes the partition's log and consume
// shard if this node has them open (an earlier ownership's state), checkpointing the shard,
// so no ack of the old state can reach a new copy.
func (e *Engine) DropConsumerState(topic string, partition int) {
	e.parts.CloseRegistered(topic, partition)
}

// checkIncarnation requires topicDir's .incarnation to name incarnation ("" skips the check:
// a topic from before incarnation ids).
func checkIncarnation(topicDir, incarnation string) error {
	if incarnation == "" {
		return nil
	}
	have, ok, err := datadir.ReadIncarnation(topicDir)
	if err != nil {
		return err
	}
	if !ok || have != incarnation {
		return fmt.Errorf("topic dir marker %q, want %q: %w", have, incarnation, transfer.ErrIncarnationChanged)
	}
	return nil
}
