package engine

import (
	"context"
	"errors"
	"fmt"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
)

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
	pt, ok := e.view.Topic(parent)
	if !ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", parent, errcode.ErrNotFound)
	}
	if _, ok := e.view.Topic(child); !ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", child, errcode.ErrNotFound)
	}
	offsets, err := e.attachPoint(ctx, pt)
	if err != nil {
		return meta.Topic{}, err
	}
	if afterAttachPoint != nil {
		afterAttachPoint()
	}
	if err := e.meta.AttachChild(ctx, parent, child, newID(), delayMs, offsets); err != nil {
		return meta.Topic{}, err
	}
	t, _ := e.view.Topic(parent)
	return t, nil
}

// afterAttachPoint, when set by a test, runs between the attach-point reads and the Raft
// proposal: records committed there must still reach the child.
var afterAttachPoint func()

// attachPoint reads the committed high watermark of every partition of parent: a local read
// (opening the log: exact) or one exact stats call per remote partition, 16 in flight.
func (e *Engine) attachPoint(ctx context.Context, parent meta.Topic) ([]int64, error) {
	out := make([]int64, parent.Partitions)
	errs := make([]error, parent.Partitions)
	fanIn(parent.Partitions, func(p int) { out[p], errs[p] = e.partitionHWM(ctx, parent, p) })
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: the attach point of %q could not be read on every partition: %v", errcode.ErrUnavailable, parent.Name, err)
	}
	return out, nil
}

// partitionHWM is one partition's committed high watermark, asked of its owner.
func (e *Engine) partitionHWM(ctx context.Context, t meta.Topic, p int) (int64, error) {
	o := e.ownerOf(t.Name, p)
	switch {
	case o.local:
		return e.ExactHighWatermark(t, p)
	case !o.known || o.dead || o.addr == "" || e.peers == nil:
		return 0, fmt.Errorf("partition %d: owner %q cannot be asked", p, o.id)
	}
	sctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	return e.peers.ExactHighWatermark(sctx, o.addr, t.Name, p)
}

// ExactHighWatermark is the committed HWM of a partition this node owns, opening its log if
// it is closed (op 8 in exact mode).
func (e *Engine) ExactHighWatermark(t meta.Topic, p int) (int64, error) {
	if !e.owns(t.Name, p) {
		return 0, fmt.Errorf("%s/%d: %w", t.Name, p, errcode.ErrNotOwner)
	}
	pt, err := e.parts.Get(t, p)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	return pt.Log().HighWatermark(), nil
}

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
