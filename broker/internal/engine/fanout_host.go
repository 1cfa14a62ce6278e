package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/wal"
)

// FanoutHost adapts the engine to the fan-out runner (fanout.Host): links and ownership from
// the local replica, parent logs from the registry, child commits local or over node RPC.
type FanoutHost struct{ e *Engine }

// FanoutHost returns the engine's fanout.Host.
func (e *Engine) FanoutHost() FanoutHost { return FanoutHost{e} }

var _ fanout.Host = FanoutHost{}

// DesiredCursors implements fanout.Host: every link × every parent partition owned here.
func (h FanoutHost) DesiredCursors() ([]fanout.Desired, bool) {
	e := h.e
	var out []fanout.Desired
	for _, child := range e.allTopics() {
		if child.Parent == "" || child.AttachEpoch == "" {
			continue
		}
		parent, ok := e.view.Topic(child.Parent)
		if !ok {
			continue
		}
		for _, p := range e.ownedPartitions(parent) {
			out = append(out, fanout.Desired{Parent: parent.Name, Partition: p, Child: child.Name,
				Epoch: child.AttachEpoch, AttachOffsets: child.AttachOffsets, DelayMs: child.FanoutDelayMs,
				Dir: e.parts.PartitionDir(parent.Name, p)})
		}
	}
	for _, l := range e.meta.AllRemoteLinks() {
		parent, ok := e.view.Topic(l.Parent)
		if !ok || !slices.Contains(parent.RemoteLinks, meta.RemoteRef{ID: l.ID, Epoch: l.AttachEpoch}) {
			continue
		}
		owned := e.ownedPartitions(parent)
		if len(owned) == 0 {
			continue // no sender here: the password is not opened on this node
		}
		target := e.remoteTarget(l)
		for _, p := range owned {
			out = append(out, fanout.Desired{Parent: parent.Name, Partition: p, Child: l.ID,
				Epoch: l.AttachEpoch, AttachOffsets: l.AttachOffsets, DelayMs: l.DelayMs,
				Dir: e.parts.PartitionDir(parent.Name, p), Remote: target})
		}
	}
	return out, true
}

// LatestDomainVersion implements fanout.Host.
func (h FanoutHost) LatestDomainVersion() uint64 { return h.e.meta.LatestDomainVersion() }

// CaughtUp implements fanout.Host.
func (h FanoutHost) CaughtUp() bool { return h.e.meta.AppliedCaughtUp() }

// ParentLog implements fanout.Host: the local parent log, opened if needed.
func (h FanoutHost) ParentLog(parent string, p int) (fanout.ParentLog, error) {
	t, ok := h.e.view.Topic(parent)
	if !ok {
		return nil, fmt.Errorf("%s: %w", parent, errcode.ErrTopicGone)
	}
	if !h.e.owns(parent, p) {
		return nil, fmt.Errorf("%s/%d: %w", parent, p, errcode.ErrNotOwner)
	}
	pt, err := h.e.parts.Get(t, p)
	if err != nil {
		return nil, err
	}
	return pt.Log(), nil
}

// ChildPartitions implements fanout.Host.
func (h FanoutHost) ChildPartitions(child string) (int, bool) {
	t, ok := h.e.view.Topic(child)
	return t.Partitions, ok
}

// ParentPartitions implements fanout.Host.
func (h FanoutHost) ParentPartitions(parent string) int {
	t, _ := h.e.view.Topic(parent)
	return t.Partitions
}

// LinkCurrent implements fanout.Host.
func (h FanoutHost) LinkCurrent(parent, child, epoch string) bool {
	if meta.IsRemoteID(child) {
		p, ok := h.e.view.Topic(parent)
		return ok && slices.Contains(p.RemoteLinks, meta.RemoteRef{ID: child, Epoch: epoch})
	}
	t, ok := h.e.view.Topic(child)
	return ok && t.Parent == parent && t.AttachEpoch == epoch
}

// LeaderLink implements fanout.Host with a leader-confirmed read of the child.
func (h FanoutHost) LeaderLink(ctx context.Context, parent, child string) (string, bool, error) {
	if meta.IsRemoteID(child) {
		// A remote link is confirmed through its parent's record, which lists id and epoch.
		p, found, err := h.e.meta.ConfirmTopic(ctx, parent)
		if err != nil || !found {
			return "", false, err
		}
		i := slices.IndexFunc(p.RemoteLinks, func(r meta.RemoteRef) bool { return r.ID == child })
		if i < 0 {
			return "", false, nil
		}
		return p.RemoteLinks[i].Epoch, true, nil
	}
	t, found, err := h.e.meta.ConfirmTopic(ctx, child)
	if err != nil {
		return "", false, err
	}
	if !found || t.Parent != parent {
		return "", false, nil
	}
	return t.AttachEpoch, true, nil
}

// errChildOwnerDown: a child partition's owner is dead; the cursor stalls on that bucket.
var errChildOwnerDown = errors.New("child partition owner is down")

// CommitChild implements fanout.Host: the child partition's produce commit (fsync + verify),
// here or on its owner. Fan-out never reroutes: a dead owner fails the bucket, which retries.
func (h FanoutHost) CommitChild(ctx context.Context, child string, p int, entries []plog.Entry) error {
	e := h.e
	t, ok := e.view.Topic(child)
	if !ok {
		return fmt.Errorf("%s: %w", child, errcode.ErrTopicGone)
	}
	now := e.now().UnixMilli()
	recs := make([]wal.Record, len(entries))
	for i, en := range entries {
		recs[i] = wal.Record{Topic: child, Incarnation: t.Incarnation, Key: string(en.Key), Partition: uint32(p),
			AcceptedAtMs: now, Payload: en.Payload}
	}
	o := e.ownerOf(child, p)
	var err error
	switch {
	case o.local:
		_, err = e.CommitLocal(ctx, child, t.Incarnation, p, recs)
	case !o.known || o.dead || o.addr == "" || e.peers == nil:
		err = fmt.Errorf("%s/%d on %q: %w", child, p, o.id, errChildOwnerDown)
	default:
		err = e.peers.CommitRemote(ctx, o.addr, child, t.Incarnation, p, recs)
	}
	if err == nil {
		e.m.FanoutCommitted.WithLabelValues(t.Parent, child).Add(float64(len(entries)))
	}
	return err
}

// OwnedPartitionDirs implements fanout.Host.
func (h FanoutHost) OwnedPartitionDirs() []fanout.PartitionDir {
	e := h.e
	var out []fanout.PartitionDir
	for _, t := range e.allTopics() {
		for _, p := range e.ownedPartitions(t) {
			out = append(out, fanout.PartitionDir{Topic: t.Name, Partition: p, Dir: e.parts.PartitionDir(t.Name, p)})
		}
	}
	return out
}

// FanoutObserver feeds the fan-out runner's events into the metrics.
type FanoutObserver struct{ m *metrics.Metrics }

// FanoutObserver returns the runner's metrics observer.
func (e *Engine) FanoutObserver() FanoutObserver { return FanoutObserver{e.m} }

var _ fanout.Observer = FanoutObserver{}

// Lag implements fanout.Observer.
func (o FanoutObserver) Lag(parent, child string, p int, msgs int64) {
	o.m.FanoutLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(float64(msgs))
}

// DueLag implements fanout.Observer.
func (o FanoutObserver) DueLag(parent, child string, p int, seconds float64) {
	o.m.FanoutDueLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(seconds)
}

// Dropped implements fanout.Observer.
func (o FanoutObserver) Dropped(parent, child string, n int64) {
	o.m.FanoutDropped.WithLabelValues(parent, child).Add(float64(n))
}

// CursorCorrupt implements fanout.Observer.
func (o FanoutObserver) CursorCorrupt(string, string, int) {
	o.m.Errors.WithLabelValues("fanout", "cursor_corrupt").Inc()
}

var _ fanout.StartObserver = FanoutObserver{}

// CursorStarted implements fanout.StartObserver: the link's counters exist at zero.
func (o FanoutObserver) CursorStarted(parent, child string, _ int, remote bool) {
	if remote {
		o.m.InitRemoteLink(parent, child, fanout.RemoteSendErrorStates)
		return
	}
	o.m.InitLink(parent, child)
}

// Forget implements fanout.Observer: the stopped cursor's series go away.
func (o FanoutObserver) Forget(parent, child string, p int) {
	o.m.FanoutLag.DeleteLabelValues(parent, child, metrics.Partition(p))
	o.m.FanoutDueLag.DeleteLabelValues(parent, child, metrics.Partition(p))
}

var _ fanout.RemoteObserver = FanoutObserver{}

// RemoteLag implements fanout.RemoteObserver.
func (o FanoutObserver) RemoteLag(parent, child string, p int, msgs int64) {
	o.m.FanoutRemoteLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(float64(msgs))
}

// RemoteDueLag implements fanout.RemoteObserver.
func (o FanoutObserver) RemoteDueLag(parent, child string, p int, seconds float64) {
	o.m.FanoutRemoteDueLag.WithLabelValues(parent, child, metrics.Partition(p)).Set(seconds)
}

// RemoteSent implements fanout.RemoteObserver.
func (o FanoutObserver) RemoteSent(parent, child string, bytes int64) {
	o.m.FanoutRemoteSentBytes.WithLabelValues(parent, child).Add(float64(bytes))
}

// RemoteSendError implements fanout.RemoteObserver.
func (o FanoutObserver) RemoteSendError(parent, child, state string) {
	o.m.FanoutRemoteSendErrors.WithLabelValues(parent, child, state).Inc()
}

// ForgetRemote implements fanout.RemoteObserver.
func (o FanoutObserver) ForgetRemote(parent, child string, p int) {
	o.m.FanoutRemoteLag.DeleteLabelValues(parent, child, metrics.Partition(p))
	o.m.FanoutRemoteDueLag.DeleteLabelValues(parent, child, metrics.Partition(p))
}

// remoteTarget is the sender's view of link l on this node: the password opened from its
// sealed form (or the plaintext an older version stored), and the host allow-list. A sealed
// password this node cannot open (no or another cluster secret) sets CredErr: the link then
// reports unauthorized without asking the target.
func (e *Engine) remoteTarget(l meta.RemoteLink) *fanout.RemoteTarget {
	t := &fanout.RemoteTarget{URLs: l.URLs, Topic: l.Topic, User: l.User, Password: l.Password,
		Allowed: e.cfg.RemoteAllowedHosts}
	if l.PasswordSealed == "" {
		return t
	}
	if e.cfg.LinkKey == nil {
		t.CredErr = errors.New("no cluster secret configured")
		return t
	}
	pw, err := e.cfg.LinkKey.Open(l.PasswordSealed, meta.SealAAD(l.Parent, l.ID))
	if err != nil {
		t.CredErr = err
		return t
	}
	t.Password = pw
	return t
}
