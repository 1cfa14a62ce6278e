package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Remote children (docs/internals/fanout.md §13): a link stored under r/<parent>\x00<id> whose
// cursors send into another Narad cluster's batch produce. Attach runs the target checks and
// reads the start point on the node that received the request, before any proposal; the
// proposal itself is forwarded to the leader by the metastore.

// AttachRemote checks the target, reads the start point on every parent partition and
// proposes the link. Nothing is proposed when a check fails (service.TargetError, 422) or an
// owner cannot be asked (ErrUnavailable, 503).
func (l *Links) AttachRemote(ctx context.Context, req service.RemoteAttach) (meta.Topic, service.ChildStatus, error) {
	pt, ok := l.cfg.Node.Topic(req.Parent)
	if !ok {
		return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("topic %q: %w", req.Parent, errcode.ErrNotFound)
	}
	id, err := meta.RemoteID(req.URLs[0], req.Topic)
	if err != nil {
		return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: %v", errcode.ErrInvalid, err)
	}
	if slices.ContainsFunc(pt.RemoteLinks, func(r meta.RemoteRef) bool { return r.ID == id }) {
		return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: %q already has the remote child %s", errcode.ErrConflict, pt.Name, id)
	}
	if len(pt.Children)+len(pt.RemoteLinks) >= meta.MaxChildren {
		return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: %q already has %d children", errcode.ErrConflict, pt.Name, meta.MaxChildren)
	}
	target := RemoteTarget{URLs: req.URLs, Topic: req.Topic, User: req.User, Password: req.Password,
		Allowed: l.cfg.RemoteAllowedHosts}
	var sealed string
	if req.Password != "" {
		if l.cfg.LinkKey == nil {
			return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: remote-link passwords are stored encrypted with a key derived from the cluster secret, and this node has none configured (set NARAD_CLUSTER_SECRET or --cluster-secret-file)", errcode.ErrConflict)
		}
		if sealed, err = l.cfg.LinkKey.Seal(req.Password, meta.SealAAD(pt.Name, id)); err != nil {
			return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
		}
	}
	if err := CheckTarget(ctx, target, l.cfg.HTTPClient); err != nil {
		return meta.Topic{}, service.ChildStatus{}, service.NewTargetError(CheckReason(err))
	}
	start := req.Start
	if start == "" {
		start = meta.StartAttach
	}
	offsets, err := l.remoteStart(ctx, pt, start)
	if err != nil {
		return meta.Topic{}, service.ChildStatus{}, err
	}
	// The password leaves this node only sealed: the proposal (forwarded to the leader), the
	// Raft log, snapshots and the FSM hold PasswordSealed, never the clear text.
	link := meta.RemoteLink{Parent: pt.Name, ID: id, URLs: req.URLs, Topic: req.Topic, User: req.User,
		PasswordSealed: sealed, DelayMs: req.DelayMs, Start: start, AttachEpoch: l.cfg.NewEpoch(), AttachOffsets: offsets,
		CreatedAt: l.cfg.Now().Unix()}
	t, err := l.cfg.Meta.AttachRemote(ctx, link)
	if err != nil {
		return meta.Topic{}, service.ChildStatus{}, err
	}
	l.cfg.Logger.Info("remote child attached", "parent", pt.Name, "link", link, "start", start)
	return t, remoteListing(link), nil
}

// remoteStart reads every parent partition's start offset for mode, 16 in flight; any owner
// that cannot be asked fails the attach with 503 (nothing proposed). The modes
// (docs/internals/fanout.md §13): attach = the attach point, oldest = the oldest retained
// offset, consumer_frontier = the offset after the consumers' frontier.
func (l *Links) remoteStart(ctx context.Context, parent meta.Topic, mode string) ([]int64, error) {
	if mode == meta.StartAttach {
		return l.AttachPoint(ctx, parent)
	}
	out := make([]int64, parent.Partitions)
	errs := make([]error, parent.Partitions)
	inParallel(parent.Partitions, func(p int) {
		sp, err := l.partitionStart(ctx, parent, p)
		errs[p] = err
		if mode == meta.StartOldest {
			out[p] = sp.Oldest
		} else {
			out[p] = sp.Frontier
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: the start point of %q could not be read on every partition: %v", errcode.ErrUnavailable, parent.Name, err)
	}
	return out, nil
}

// partitionStart asks one partition's owner for its start point.
func (l *Links) partitionStart(ctx context.Context, t meta.Topic, p int) (StartPoint, error) {
	o := l.cfg.Node.Owner(t.Name, p)
	switch {
	case o.Local:
		return l.cfg.Node.ExactStartPoint(t, p)
	case !l.askable(o):
		return StartPoint{}, fmt.Errorf("partition %d: owner %q cannot be asked", p, o.ID)
	}
	sp, ok := l.cfg.Peers.(StartPointPeers)
	if !ok {
		return StartPoint{}, fmt.Errorf("partition %d: peers cannot report a start point", p)
	}
	sctx, cancel := context.WithTimeout(ctx, ownerCallTimeout)
	defer cancel()
	return sp.ExactStartPoint(sctx, o.Addr, t.Name, p)
}

// DetachRemote deletes the link: its cursors stop on the next reconcile tick and its cursor
// files are swept like a local child's.
func (l *Links) DetachRemote(ctx context.Context, parent, id string) error {
	pt, ok := l.cfg.Node.Topic(parent)
	if !ok {
		return fmt.Errorf("topic %q: %w", parent, errcode.ErrNotFound)
	}
	if !slices.ContainsFunc(pt.RemoteLinks, func(r meta.RemoteRef) bool { return r.ID == id }) {
		return fmt.Errorf("%w: %q has no remote child %s", errcode.ErrNotFound, parent, id)
	}
	if err := l.cfg.Meta.DetachRemote(ctx, parent, id); err != nil {
		return err
	}
	l.cfg.Logger.Info("remote child detached", "parent", parent, "id", id)
	return nil
}

// ResolveRemote returns the id of parent's remote link named by ref: its id, or its listing
// name remote:<url>/<topic>.
func (l *Links) ResolveRemote(parent, ref string) (string, bool) {
	for _, link := range l.cfg.Meta.RemoteLinks(parent) {
		if link.ID == ref || link.Name() == ref {
			return link.ID, true
		}
	}
	return "", false
}

// ResealRemoteLinks is the one-shot migration of remote-link passwords an older version
// stored in clear: once this node's replica is caught up, every such link is proposed again
// with its password sealed (op 22), and the plaintext leaves the FSM (it stays in Raft log
// entries until the next snapshot compacts them). Every node runs it at start; the first
// proposal of a link wins, the others change nothing. Without a cluster secret (no LinkKey)
// there is nothing to seal with, and the links keep working in clear.
func (l *Links) ResealRemoteLinks(ctx context.Context) {
	if l.cfg.LinkKey == nil || l.cfg.Meta == nil {
		return
	}
	if err := l.cfg.Meta.WaitCaughtUp(ctx); err != nil {
		return
	}
	var done, failed int
	for _, link := range l.cfg.Meta.AllRemoteLinks() {
		if link.Password == "" || ctx.Err() != nil {
			continue
		}
		sealed, err := l.cfg.LinkKey.Seal(link.Password, meta.SealAAD(link.Parent, link.ID))
		if err == nil {
			err = l.cfg.Meta.ResealRemote(ctx, link.Parent, link.ID, link.AttachEpoch, sealed)
		}
		if err != nil {
			failed++
			l.cfg.Logger.Warn("remote link password not yet sealed; retried at the next start", "parent", link.Parent, "id", link.ID, "err", err)
			continue
		}
		done++
	}
	if done > 0 || failed > 0 {
		l.cfg.Logger.Info("remote link passwords stored in clear by an older version sealed", "sealed", done, "failed", failed)
	}
}
