package engine

import (
	"context"
	"errors"
	"fmt"

	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// RemoteCommitter commits a batch on another node (CommitProduceBatch, node RPC op 11). The
// cluster layer installs one; without it a remote destination is treated as failing.
type RemoteCommitter interface {
	CommitRemote(ctx context.Context, addr, topic, incarnation string, partition int, recs []wal.Record) error
}

// LeaderConfirmer answers leader-confirmed topic reads (docs/internals/metastore.md §9).
type LeaderConfirmer interface {
	ConfirmTopic(ctx context.Context, name string) (meta.Topic, bool, error)
}

// Topology adapts the local replica to dispatch.Topology.
type Topology struct{ e *Engine }

// Topology returns the dispatcher's view of placement.
func (e *Engine) Topology() Topology { return Topology{e} }

// Partitions implements dispatch.Topology.
func (t Topology) Partitions(topic, incarnation string) (int, bool) {
	tp, ok := t.e.view.Topic(topic)
	if !ok || (incarnation != "" && tp.Incarnation != incarnation) {
		return 0, false
	}
	return tp.Partitions, true
}

// Destination implements dispatch.Topology.
func (t Topology) Destination(topic string, partition int) dispatch.Destination {
	a, ok := t.e.view.Assignment(topic, partition)
	if !ok {
		return dispatch.Destination{Kind: dispatch.DestDeadOwner}
	}
	if a.Owner == t.e.cfg.NodeID {
		return dispatch.Destination{Kind: dispatch.DestLocal, Node: a.Owner}
	}
	m, ok := t.e.view.Member(a.Owner)
	if !ok || m.Status == meta.MemberDead {
		return dispatch.Destination{Kind: dispatch.DestDeadOwner, Node: a.Owner}
	}
	return dispatch.Destination{Kind: dispatch.DestRemote, Node: a.Owner, Addr: m.ClusterAddr}
}

// CaughtUp implements dispatch.Topology.
func (t Topology) CaughtUp() bool { return t.e.meta.AppliedCaughtUp() }

// ConfirmAbsent implements dispatch.Topology with a leader-confirmed read.
func (t Topology) ConfirmAbsent(ctx context.Context, topic, incarnation string) (bool, error) {
	tp, found, err := t.e.meta.ConfirmTopic(ctx, topic)
	if err != nil {
		return false, err
	}
	return !found || (incarnation != "" && tp.Incarnation != incarnation), nil
}

// Committer adapts CommitLocal (and a remote committer) to dispatch.Committer.
type Committer struct {
	e      *Engine
	remote RemoteCommitter
}

// Committer returns the dispatcher's committer; remote may be nil on a single node.
func (e *Engine) Committer(remote RemoteCommitter) Committer { return Committer{e, remote} }

// Commit implements dispatch.Committer.
func (c Committer) Commit(ctx context.Context, dest dispatch.Destination, topic string, partition int, recs []wal.Record) error {
	inc := recs[0].Incarnation
	switch dest.Kind {
	case dispatch.DestLocal:
		_, err := c.e.CommitLocal(ctx, topic, inc, partition, recs)
		if err == nil {
			c.e.m.DispatchedRecords.WithLabelValues("local").Add(float64(len(recs)))
		}
		return err
	case dispatch.DestRemote:
		if c.remote == nil {
			return fmt.Errorf("no route to %s: %w", dest.Node, errNoRemote)
		}
		err := c.remote.CommitRemote(ctx, dest.Addr, topic, inc, partition, recs)
		if err == nil {
			c.e.m.DispatchedRecords.WithLabelValues("remote").Add(float64(len(recs)))
		}
		return err
	default:
		return fmt.Errorf("owner %s is dead", dest.Node)
	}
}

var errNoRemote = errors.New("remote commit unavailable")
