package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Remote children (docs/internals/fanout.md §13): a link stored under r/<parent>\x00<id> whose cursors
// send into another Narad cluster's batch produce. Attach runs the target checks and reads
// the start point on the node that received the request, before any proposal; the proposal
// itself is forwarded to the leader by the metastore.

// StartPoint is what the owner of a parent partition reports for a remote link's start:
// committed HWM, oldest retained offset and the next offset after the consumer frontier.
type StartPoint struct {
	HighWatermark int64
	Oldest        int64
	Frontier      int64 // first offset the consumers have not resolved (≥ Oldest)
}

// startPointPeers is the peer call behind a remote link's start point (op 8, exact mode).
type startPointPeers interface {
	ExactStartPoint(ctx context.Context, addr, topic string, partition int) (StartPoint, error)
}

// RemoteStatus reports the live state of a remote cursor on this node (the fan-out runner's
// RemoteStatus).
type RemoteStatus func(parent string, partition int, id string) (state, lastErr string, ok bool)

// AttachRemote implements api.RemoteBackend: checks the target, reads the start point on
// every parent partition and proposes the link. Nothing is proposed when a check fails
// (service.TargetError, 422) or an owner cannot be asked (503).
func (e *Engine) AttachRemote(ctx context.Context, req service.RemoteAttach) (meta.Topic, service.ChildStatus, error) {
	pt, ok := e.view.Topic(req.Parent)
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
	target := fanout.RemoteTarget{URLs: req.URLs, Topic: req.Topic, User: req.User, Password: req.Password,
		Allowed: e.cfg.RemoteAllowedHosts}
	var sealed string
	if req.Password != "" {
		if e.cfg.LinkKey == nil {
			return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: remote-link passwords are stored encrypted with a key derived from the cluster secret, and this node has none configured (set NARAD_CLUSTER_SECRET or --cluster-secret-file)", errcode.ErrConflict)
		}
		if sealed, err = e.cfg.LinkKey.Seal(req.Password, meta.SealAAD(pt.Name, id)); err != nil {
			return meta.Topic{}, service.ChildStatus{}, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
		}
	}
	if err := fanout.CheckTarget(ctx, target, e.remoteHTTP); err != nil {
		return meta.Topic{}, service.ChildStatus{}, service.NewTargetError(fanout.CheckReason(err))
	}
	start := req.Start
	if start == "" {
		start = meta.StartAttach
	}
	offsets, err := e.remoteStart(ctx, pt, start)
	if err != nil {
		return meta.Topic{}, service.ChildStatus{}, err
	}
	// The password leaves this node only sealed: the proposal (forwarded to the leader), the
	// Raft log, snapshots and the FSM hold PasswordSealed, never the clear text.
	l := meta.RemoteLink{Parent: pt.Name, ID: id, URLs: req.URLs, Topic: req.Topic, User: req.User,
		PasswordSealed: sealed, DelayMs: req.DelayMs, Start: start, AttachEpoch: newID(), AttachOffsets: offsets,
		CreatedAt: e.now().Unix()}
	t, err := e.meta.AttachRemote(ctx, l)
	if err != nil {
		return meta.Topic{}, service.ChildStatus{}, err
	}
	e.log.Info("remote child attached", "parent", pt.Name, "link", l, "start", start)
	return t, remoteListing(l), nil
}

// remoteStart reads every parent partition's start offset for mode, 16 in flight; any owner
// that cannot be asked fails the attach with 503 (nothing proposed).
func (e *Engine) remoteStart(ctx context.Context, parent meta.Topic, mode string) ([]int64, error) {
	if mode == meta.StartAttach {
		return e.attachPoint(ctx, parent)
	}
	out := make([]int64, parent.Partitions)
	errs := make([]error, parent.Partitions)
	fanIn(parent.Partitions, func(p int) {
		sp, err := e.partitionStart(ctx, parent, p)
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
func (e *Engine) partitionStart(ctx context.Context, t meta.Topic, p int) (StartPoint, error) {
	o := e.ownerOf(t.Name, p)
	switch {
	case o.local:
		return e.ExactStartPoint(t, p)
	case !o.known || o.dead || o.addr == "" || e.peers == nil:
		return StartPoint{}, fmt.Errorf("partition %d: owner %q cannot be asked", p, o.id)
	}
	sp, ok := e.peers.(startPointPeers)
	if !ok {
		return StartPoint{}, fmt.Errorf("partition %d: peers cannot report a start point", p)
	}
	sctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	return sp.ExactStartPoint(sctx, o.addr, t.Name, p)
}

// ExactStartPoint is the start point of a partition this node owns, opening its log if it is
// closed (op 8 exact mode, consumer_frontier field).
func (e *Engine) ExactStartPoint(t meta.Topic, p int) (StartPoint, error) {
	if !e.owns(t.Name, p) {
		return StartPoint{}, fmt.Errorf("%s/%d: %w", t.Name, p, errcode.ErrNotOwner)
	}
	pt, err := e.parts.Get(t, p)
	if err != nil {
		return StartPoint{}, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	sp := StartPoint{HighWatermark: pt.Log().HighWatermark(), Oldest: pt.Log().OldestOffset()}
	frontier := int64(-1)
	sh := pt.Shard()
	if sh != nil {
		frontier = sh.Frontier().Frontier
	} else if c, has, err := readConsumerFiles(pt.Dir()); err != nil {
		return StartPoint{}, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	} else if has {
		frontier = c.Frontier
	}
	sp.Frontier = min(max(frontier+1, sp.Oldest), sp.HighWatermark)
	return sp, nil
}

// DetachRemote implements api.RemoteBackend: the link is deleted; its cursors stop on the next
// reconcile tick and its cursor files are swept like a local child's.
func (e *Engine) DetachRemote(ctx context.Context, parent, id string) error {
	pt, ok := e.view.Topic(parent)
	if !ok {
		return fmt.Errorf("topic %q: %w", parent, errcode.ErrNotFound)
	}
	if !slices.ContainsFunc(pt.RemoteLinks, func(r meta.RemoteRef) bool { return r.ID == id }) {
		return fmt.Errorf("%w: %q has no remote child %s", errcode.ErrNotFound, parent, id)
	}
	if err := e.meta.DetachRemote(ctx, parent, id); err != nil {
		return err
	}
	e.log.Info("remote child detached", "parent", parent, "id", id)
	return nil
}

// ResolveRemote returns the id of parent's remote link named by ref: its id, or its listing
// name remote:<url>/<topic>.
func (e *Engine) ResolveRemote(parent, ref string) (string, bool) {
	for _, l := range e.meta.RemoteLinks(parent) {
		if l.ID == ref || l.Name() == ref {
			return l.ID, true
		}
	}
	return "", false
}

// remoteListing is the static part of a remote link's children-listing entry (never the
// credentials).
func remoteListing(l meta.RemoteLink) service.ChildStatus {
	return service.ChildStatus{Name: l.Name(), ID: l.ID, Link: "remote", Kind: "remote", DelayMs: l.DelayMs,
		AttachEpoch: l.AttachEpoch, Epoch: l.AttachEpoch, Target: l.Topic, Start: l.Start,
		Cursors: []service.ChildCursor{}, RecoveryPoint: map[string]int64{}}
}

// remoteChildren lists parent's remote links with the reports of its partitions (docs/internals/http-api.md §2.13):
// state = the worst state any running cursor reports (incomplete when a partition did not
// report), recovery_point = each reporting partition's cursor position.
func (e *Engine) remoteChildren(parent meta.Topic, reports []*PartitionCursors, owners []string) []service.ChildStatus {
	var out []service.ChildStatus
	links := e.meta.RemoteLinks(parent.Name)
	for _, ref := range parent.RemoteLinks {
		i := slices.IndexFunc(links, func(l meta.RemoteLink) bool { return l.ID == ref.ID })
		if i < 0 {
			continue
		}
		l := links[i]
		cs := remoteListing(l)
		complete, state, lastErr := true, fanout.RemoteActive, ""
		var dueLag float64
		for p := range parent.Partitions {
			r := reports[p]
			if r == nil || !r.HWMKnown {
				complete = false
				continue
			}
			c, found := findCursor(r.Cursors, l.ID, l.AttachEpoch)
			if !found {
				complete = false
				continue
			}
			cs.Cursors = append(cs.Cursors, service.ChildCursor{ParentPartition: p, OwnerNode: owners[p],
				NextOffset: c.NextOffset, HighWatermark: r.HighWatermark})
			cs.RecoveryPoint[strconv.Itoa(p)] = c.NextOffset
			cs.LagMessages += max(0, r.HighWatermark-c.NextOffset)
			dueLag = max(dueLag, c.DueLagSeconds)
			if c.RemoteState != "" && c.RemoteState != fanout.RemoteActive && remoteRank(c.RemoteState) > remoteRank(state) {
				state, lastErr = c.RemoteState, c.LastError
			} else if lastErr == "" && c.LastError != "" && state == fanout.RemoteActive {
				lastErr = c.LastError
			}
		}
		cs.LagComplete = complete
		if !complete && state == fanout.RemoteActive {
			state = service.ChildIncomplete
		}
		cs.State, cs.LastError = state, lastErr
		cs.DueLagSeconds = &dueLag
		out = append(out, cs)
	}
	return out
}

// remoteRank orders link states: the listing shows the most severe one.
func remoteRank(s string) int {
	switch s {
	case fanout.RemoteRejected:
		return 8
	case fanout.RemoteNotAllowedHost:
		return 7
	case fanout.RemoteRedirectRefused:
		return 6
	case fanout.RemoteUnauthorized:
		return 5
	case fanout.RemoteTopicMissing:
		return 4
	case fanout.RemoteUnreachable:
		return 3
	case fanout.RemoteBehindRetention:
		return 2
	case fanout.RemoteActive:
		return 1
	}
	return 0
}

// resealRemoteLinks is the one-shot migration of remote-link passwords an older version
// stored in clear: once this node's replica is caught up, every such link is proposed again
// with its password sealed (op 22), and the plaintext leaves the FSM (it stays in Raft log
// entries until the next snapshot compacts them). Every node runs it at start; the first
// proposal of a link wins, the others change nothing. Without a cluster secret (no LinkKey)
// there is nothing to seal with, and the links keep working in clear.
func (e *Engine) resealRemoteLinks(ctx context.Context) {
	if e.cfg.LinkKey == nil || e.meta == nil {
		return
	}
	if err := e.meta.WaitCaughtUp(ctx); err != nil {
		return
	}
	var done, failed int
	for _, l := range e.meta.AllRemoteLinks() {
		if l.Password == "" || ctx.Err() != nil {
			continue
		}
		sealed, err := e.cfg.LinkKey.Seal(l.Password, meta.SealAAD(l.Parent, l.ID))
		if err == nil {
			err = e.meta.ResealRemote(ctx, l.Parent, l.ID, l.AttachEpoch, sealed)
		}
		if err != nil {
			failed++
			e.log.Warn("remote link password not yet sealed; retried at the next start", "parent", l.Parent, "id", l.ID, "err", err)
			continue
		}
		done++
	}
	if done > 0 || failed > 0 {
		e.log.Info("remote link passwords stored in clear by an older version sealed", "sealed", done, "failed", failed)
	}
}
