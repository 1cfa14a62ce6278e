package engine

import (
	"context"
	"errors"
	"fmt"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/move/source"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// The fan-out host and the links service live in package fanout (docs/internals/fanout.md);
// the engine gives them what only it has (fanoutNode) and keeps the service-layer entry points
// api's FanoutBackend and RemoteBackend call, each a delegation.

// newFanoutLinks builds the engine's fan-out links over its fanoutNode.
func newFanoutLinks(e *Engine) *fanout.Links {
	var store fanout.Metastore
	if e.meta != nil {
		store = e.meta // a nil *meta.Store must stay a nil interface
	}
	var peers fanout.Peers
	if e.peers != nil {
		peers = e.peers
	}
	return fanout.NewLinks(fanout.LinksConfig{
		NodeConfig: fanout.NodeConfig{Node: fanoutNode{e}, Meta: store, Metrics: e.m,
			RemoteAllowedHosts: e.cfg.RemoteAllowedHosts, LinkKey: e.cfg.LinkKey},
		Peers: peers, HTTPClient: e.cfg.RemoteHTTPClient, Logger: e.log, Now: e.now, NewEpoch: newID,
	})
}

// FanoutHost returns the fan-out runner's Host on this engine.
func (e *Engine) FanoutHost() fanout.Host { return e.fan.Host() }

// BindFanout binds the fan-out runner whose live cursor state the children listing shows.
// It is the engine's one late-bound collaborator: the runner is built over this engine's
// FanoutHost, so it cannot exist before New and be passed in Config. Call it once, before Run
// and before the HTTP listener starts; without it the listing shows file state only.
func (e *Engine) BindFanout(r fanout.Status) { e.fan.Bind(r) }

// Children implements api.FanoutBackend (fanout.Links.Children).
func (e *Engine) Children(ctx context.Context, parent meta.Topic) []service.ChildStatus {
	return e.fan.Children(ctx, parent)
}

// LocalFanoutCursors reports a parent partition this node owns (op 17's owner side).
func (e *Engine) LocalFanoutCursors(parent meta.Topic, p int) fanout.PartitionCursors {
	return e.fan.LocalCursors(parent, p)
}

// AttachChild implements api.FanoutBackend: a follower forwards the attach to the leader
// (op 15), which records the attach point and proposes the link (docs/internals/fanout.md §5).
func (e *Engine) AttachChild(ctx context.Context, parent, child string, delayMs int64) (meta.Topic, error) {
	var fwd meta.Topic
	forwarded, err := e.forwardWrite(ctx, func(addr string) (uint64, error) {
		fctx, cancel := context.WithTimeout(ctx, peerCallTimeout+statsTimeout)
		defer cancel()
		t, idx, err := e.peers.AttachChild(fctx, addr, parent, child, delayMs)
		fwd = t
		return idx, err
	})
	if forwarded || err != nil {
		if err != nil {
			return meta.Topic{}, err
		}
		if t, ok := e.view.Topic(parent); ok {
			return t, nil
		}
		return fwd, nil
	}
	return e.AttachChildAsLeader(ctx, parent, child, delayMs)
}

// AttachChildAsLeader reads the attach point (every parent partition's committed high
// watermark, 16 in flight; any owner that cannot be asked fails the attach with 503 and
// nothing is proposed) and proposes the link with a fresh epoch.
func (e *Engine) AttachChildAsLeader(ctx context.Context, parent, child string, delayMs int64) (meta.Topic, error) {
	if err := e.fan.AttachChildAsLeader(ctx, parent, child, delayMs, afterAttachPoint); err != nil {
		return meta.Topic{}, err
	}
	t, _ := e.view.Topic(parent)
	return t, nil
}

// afterAttachPoint, when set by a test, runs between the attach-point reads and the Raft
// proposal: records committed there must still reach the child.
var afterAttachPoint func()

// DetachChild implements api.FanoutBackend; a follower forwards it (op 16).
func (e *Engine) DetachChild(ctx context.Context, parent, child string) error {
	forwarded, err := e.forwardWrite(ctx, func(addr string) (uint64, error) {
		fctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
		defer cancel()
		return e.peers.DetachChild(fctx, addr, parent, child)
	})
	if forwarded || err != nil {
		return err
	}
	return e.DetachChildAsLeader(ctx, parent, child)
}

// DetachChildAsLeader proposes the detach on the leader.
func (e *Engine) DetachChildAsLeader(ctx context.Context, parent, child string) error {
	return e.meta.DetachChild(ctx, parent, child)
}

// AttachRemote implements api.RemoteBackend (fanout.Links.AttachRemote).
func (e *Engine) AttachRemote(ctx context.Context, req service.RemoteAttach) (meta.Topic, service.ChildStatus, error) {
	return e.fan.AttachRemote(ctx, req)
}

// DetachRemote implements api.RemoteBackend (fanout.Links.DetachRemote).
func (e *Engine) DetachRemote(ctx context.Context, parent, id string) error {
	return e.fan.DetachRemote(ctx, parent, id)
}

// ResolveRemote implements api.RemoteBackend (fanout.Links.ResolveRemote).
func (e *Engine) ResolveRemote(parent, ref string) (string, bool) {
	return e.fan.ResolveRemote(parent, ref)
}

// ExactStartPoint is the start point of a partition this node owns, opening its log if it is
// closed (op 8 exact mode, consumer_frontier field).
func (e *Engine) ExactStartPoint(t meta.Topic, p int) (fanout.StartPoint, error) {
	if !e.owns(t.Name, p) {
		return fanout.StartPoint{}, fmt.Errorf("%s/%d: %w", t.Name, p, errcode.ErrNotOwner)
	}
	pt, err := e.parts.Get(t, p)
	if err != nil {
		return fanout.StartPoint{}, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	sp := fanout.StartPoint{HighWatermark: pt.Log().HighWatermark(), Oldest: pt.Log().OldestOffset()}
	frontier := int64(-1)
	if sh := pt.Shard(); sh != nil {
		frontier = sh.Frontier().Frontier
	} else if c, has, err := source.ReadConsumerFiles(pt.Dir()); err != nil {
		return fanout.StartPoint{}, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	} else if has {
		frontier = c.Frontier
	}
	sp.Frontier = min(max(frontier+1, sp.Oldest), sp.HighWatermark)
	return sp, nil
}

// fanoutNode is the engine's side of the fan-out boundary (fanout.Node): its replica view,
// its partition registry and its produce commit path.
type fanoutNode struct{ e *Engine }

var _ fanout.Node = fanoutNode{}

func (n fanoutNode) Topic(name string) (meta.Topic, bool)    { return n.e.view.Topic(name) }
func (n fanoutNode) Topics() []meta.Topic                    { return n.e.allTopics() }
func (n fanoutNode) OwnedPartitions(t meta.Topic) []int      { return n.e.ownedPartitions(t) }
func (n fanoutNode) PartitionDir(topic string, p int) string { return n.e.parts.PartitionDir(topic, p) }

func (n fanoutNode) Owner(topic string, p int) fanout.Owner {
	o := n.e.ownerOf(topic, p)
	return fanout.Owner{ID: o.id, Addr: o.addr, Local: o.local, Dead: o.dead, Known: o.known}
}

func (n fanoutNode) OwnedLog(t meta.Topic, p int) (*plog.Log, error) {
	if !n.e.owns(t.Name, p) {
		return nil, fmt.Errorf("%s/%d: %w", t.Name, p, errcode.ErrNotOwner)
	}
	pt, err := n.e.parts.Get(t, p)
	if err != nil {
		return nil, err
	}
	return pt.Log(), nil
}

// PeekHighWatermark never opens a log: an open log of t's incarnation answers from memory, a
// missing directory means nothing was ever committed, a closed log answers from its
// directory when the hwm file holds an exact boundary.
func (n fanoutNode) PeekHighWatermark(t meta.Topic, p int) (int64, bool) {
	dir := n.e.parts.PartitionDir(t.Name, p)
	switch pt := n.e.parts.Peek(t.Name, p); {
	case pt != nil && pt.Incarnation() == t.Incarnation:
		return pt.Log().HighWatermark(), true
	case !dirExists(dir):
		return 0, true // nothing was ever committed here: the directory does not exist
	case n.e.parts.MarkerMatches(t):
		if st, err := plog.PeekDir(dir); err == nil && st.Exact {
			return st.HighWatermark, true
		}
	}
	return 0, false
}

// ExactHighWatermark is the committed HWM of a partition this node owns, opening its log if
// it is closed (op 8 in exact mode).
func (n fanoutNode) ExactHighWatermark(t meta.Topic, p int) (int64, error) {
	if !n.e.owns(t.Name, p) {
		return 0, fmt.Errorf("%s/%d: %w", t.Name, p, errcode.ErrNotOwner)
	}
	pt, err := n.e.parts.Get(t, p)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	return pt.Log().HighWatermark(), nil
}

func (n fanoutNode) ExactStartPoint(t meta.Topic, p int) (fanout.StartPoint, error) {
	return n.e.ExactStartPoint(t, p)
}

// errChildOwnerDown: a child partition's owner is dead; the cursor stalls on that bucket.
var errChildOwnerDown = errors.New("child partition owner is down")

// CommitChild commits a fan-out bucket to child partition p: the produce commit here, or op
// 11 on its owner. A dead or unknown owner fails the bucket (errChildOwnerDown).
func (n fanoutNode) CommitChild(ctx context.Context, child meta.Topic, p int, entries []plog.Entry) error {
	e := n.e
	now := e.now().UnixMilli()
	recs := make([]wal.Record, len(entries))
	for i, en := range entries {
		recs[i] = wal.Record{Topic: child.Name, Incarnation: child.Incarnation, Key: string(en.Key), Partition: uint32(p),
			AcceptedAtMs: now, Payload: en.Payload}
	}
	switch o := e.ownerOf(child.Name, p); {
	case o.local:
		_, err := e.CommitLocal(ctx, child.Name, child.Incarnation, p, recs)
		return err
	case !o.known || o.dead || o.addr == "" || e.peers == nil:
		return fmt.Errorf("%s/%d on %q: %w", child.Name, p, o.id, errChildOwnerDown)
	default:
		return e.peers.CommitRemote(ctx, o.addr, child.Name, child.Incarnation, p, recs)
	}
}
