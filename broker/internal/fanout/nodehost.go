package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"narad.dev/broker/internal/credseal"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/hostlist"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
)

// NodeConfig is what the node-side fan-out (NodeHost, Links) is built over.
type NodeConfig struct {
	Node    Node
	Meta    Metastore
	Metrics *metrics.Metrics
	// RemoteAllowedHosts is --remote-allowed-hosts: remote-link targets off the list are
	// refused at attach and never contacted by a sender. The zero list allows every host.
	RemoteAllowedHosts hostlist.List
	// LinkKey seals remote-link passwords before they are proposed and opens them for this
	// node's senders. nil: no cluster secret is configured.
	LinkKey *credseal.Key
}

// NodeHost is the Host of a broker node: the cursors it wants come from the local replica's
// links × the parent partitions this node owns, parent logs and child commits from Node, link
// confirmations from the metastore.
type NodeHost struct{ cfg NodeConfig }

// NewNodeHost returns the Host over cfg.
func NewNodeHost(cfg NodeConfig) NodeHost { return NodeHost{cfg} }

var _ Host = NodeHost{}

// DesiredCursors implements Host: every link × every parent partition owned here.
func (h NodeHost) DesiredCursors() ([]Desired, bool) {
	n := h.cfg.Node
	var out []Desired
	for _, child := range n.Topics() {
		if child.Parent == "" || child.AttachEpoch == "" {
			continue
		}
		parent, ok := n.Topic(child.Parent)
		if !ok {
			continue
		}
		for _, p := range n.OwnedPartitions(parent) {
			out = append(out, Desired{Parent: parent.Name, Partition: p, Child: child.Name,
				Epoch: child.AttachEpoch, AttachOffsets: child.AttachOffsets, DelayMs: child.FanoutDelayMs,
				Dir: n.PartitionDir(parent.Name, p)})
		}
	}
	for _, l := range h.cfg.Meta.AllRemoteLinks() {
		parent, ok := n.Topic(l.Parent)
		if !ok || !slices.Contains(parent.RemoteLinks, meta.RemoteRef{ID: l.ID, Epoch: l.AttachEpoch}) {
			continue
		}
		owned := n.OwnedPartitions(parent)
		if len(owned) == 0 {
			continue // no sender here: the password is not opened on this node
		}
		target := h.remoteTarget(l)
		for _, p := range owned {
			out = append(out, Desired{Parent: parent.Name, Partition: p, Child: l.ID,
				Epoch: l.AttachEpoch, AttachOffsets: l.AttachOffsets, DelayMs: l.DelayMs,
				Dir: n.PartitionDir(parent.Name, p), Remote: target})
		}
	}
	return out, true
}

// LatestDomainVersion implements Host.
func (h NodeHost) LatestDomainVersion() uint64 { return h.cfg.Meta.LatestDomainVersion() }

// CaughtUp implements Host.
func (h NodeHost) CaughtUp() bool { return h.cfg.Meta.AppliedCaughtUp() }

// ParentLog implements Host: the local parent log, opened if needed.
func (h NodeHost) ParentLog(parent string, p int) (ParentLog, error) {
	t, ok := h.cfg.Node.Topic(parent)
	if !ok {
		return nil, fmt.Errorf("%s: %w", parent, errcode.ErrTopicGone)
	}
	l, err := h.cfg.Node.OwnedLog(t, p)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ChildPartitions implements Host.
func (h NodeHost) ChildPartitions(child string) (int, bool) {
	t, ok := h.cfg.Node.Topic(child)
	return t.Partitions, ok
}

// ParentPartitions implements Host.
func (h NodeHost) ParentPartitions(parent string) int {
	t, _ := h.cfg.Node.Topic(parent)
	return t.Partitions
}

// LinkCurrent implements Host.
func (h NodeHost) LinkCurrent(parent, child, epoch string) bool {
	if meta.IsRemoteID(child) {
		p, ok := h.cfg.Node.Topic(parent)
		return ok && slices.Contains(p.RemoteLinks, meta.RemoteRef{ID: child, Epoch: epoch})
	}
	t, ok := h.cfg.Node.Topic(child)
	return ok && t.Parent == parent && t.AttachEpoch == epoch
}

// LeaderLink implements Host with a leader-confirmed read of the child.
func (h NodeHost) LeaderLink(ctx context.Context, parent, child string) (string, bool, error) {
	if meta.IsRemoteID(child) {
		// A remote link is confirmed through its parent's record, which lists id and epoch.
		p, found, err := h.cfg.Meta.ConfirmTopic(ctx, parent)
		if err != nil || !found {
			return "", false, err
		}
		i := slices.IndexFunc(p.RemoteLinks, func(r meta.RemoteRef) bool { return r.ID == child })
		if i < 0 {
			return "", false, nil
		}
		return p.RemoteLinks[i].Epoch, true, nil
	}
	t, found, err := h.cfg.Meta.ConfirmTopic(ctx, child)
	if err != nil {
		return "", false, err
	}
	if !found || t.Parent != parent {
		return "", false, nil
	}
	return t.AttachEpoch, true, nil
}

// CommitChild implements Host: the child partition's produce commit (fsync + verify), here or
// on its owner (Node.CommitChild). Fan-out never reroutes: a dead owner fails the bucket,
// which retries.
func (h NodeHost) CommitChild(ctx context.Context, child string, p int, entries []plog.Entry) error {
	t, ok := h.cfg.Node.Topic(child)
	if !ok {
		return fmt.Errorf("%s: %w", child, errcode.ErrTopicGone)
	}
	err := h.cfg.Node.CommitChild(ctx, t, p, entries)
	if err == nil {
		h.cfg.Metrics.FanoutCommitted.WithLabelValues(t.Parent, child).Add(float64(len(entries)))
	}
	return err
}

// OwnedPartitionDirs implements Host.
func (h NodeHost) OwnedPartitionDirs() []PartitionDir {
	n := h.cfg.Node
	var out []PartitionDir
	for _, t := range n.Topics() {
		for _, p := range n.OwnedPartitions(t) {
			out = append(out, PartitionDir{Topic: t.Name, Partition: p, Dir: n.PartitionDir(t.Name, p)})
		}
	}
	return out
}

// remoteTarget is the sender's view of link l on this node: the password opened from its
// sealed form (or the plaintext an older version stored), and the host allow-list. A sealed
// password this node cannot open (no or another cluster secret) sets CredErr: the link then
// reports unauthorized without asking the target.
func (h NodeHost) remoteTarget(l meta.RemoteLink) *RemoteTarget {
	t := &RemoteTarget{URLs: l.URLs, Topic: l.Topic, User: l.User, Password: l.Password,
		Allowed: h.cfg.RemoteAllowedHosts}
	if l.PasswordSealed == "" {
		return t
	}
	if h.cfg.LinkKey == nil {
		t.CredErr = errors.New("no cluster secret configured")
		return t
	}
	pw, err := h.cfg.LinkKey.Open(l.PasswordSealed, meta.SealAAD(l.Parent, l.ID))
	if err != nil {
		t.CredErr = err
		return t
	}
	t.Password = pw
	return t
}
