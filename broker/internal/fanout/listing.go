package fanout

import (
	"context"
	"slices"
	"strconv"

	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Children lists parent's children (docs/internals/http-api.md §2.13): every parent partition
// reports its high watermark and cursor positions, locally or from its owner (op 17, 16 in
// flight); a partition that cannot report makes its children's listing incomplete. Nothing
// opens a partition log.
func (l *Links) Children(ctx context.Context, parent meta.Topic) []service.ChildStatus {
	n := parent.Partitions
	reports := make([]*PartitionCursors, n)
	owners := make([]string, n)
	inParallel(n, func(p int) {
		o := l.cfg.Node.Owner(parent.Name, p)
		owners[p] = o.ID
		switch {
		case o.Local:
			r := l.LocalCursors(parent, p)
			reports[p] = &r
		case l.askable(o):
			sctx, cancel := context.WithTimeout(ctx, ownerCallTimeout)
			defer cancel()
			if r, err := l.cfg.Peers.FanoutCursors(sctx, o.Addr, parent.Name, p); err == nil {
				reports[p] = &r
			}
		}
	})

	out := make([]service.ChildStatus, 0, len(parent.Children))
	for _, name := range parent.Children {
		ct, ok := l.cfg.Node.Topic(name)
		if !ok || ct.Parent != parent.Name {
			continue
		}
		out = append(out, localListing(ct, reports, owners))
	}
	return append(out, l.remoteChildren(parent, reports, owners)...)
}

// localListing is local child ct's listing entry from its parent's partition reports: state
// incomplete when a partition did not report or has no cursor of ct's epoch yet, stalled when
// a cursor is stalled, active otherwise.
func localListing(ct meta.Topic, reports []*PartitionCursors, owners []string) service.ChildStatus {
	cs := service.ChildStatus{Name: ct.Name, Link: "local", DelayMs: ct.FanoutDelayMs, AttachEpoch: ct.AttachEpoch,
		Cursors: []service.ChildCursor{}}
	complete, stalled := true, false
	var dueLag float64
	for p, r := range reports {
		if r == nil || !r.HWMKnown {
			complete = false
			continue
		}
		c, found := findCursor(r.Cursors, ct.Name, ct.AttachEpoch)
		if !found {
			complete = false // not yet positioned
			continue
		}
		cs.Cursors = append(cs.Cursors, service.ChildCursor{ParentPartition: p, OwnerNode: owners[p],
			NextOffset: c.NextOffset, HighWatermark: r.HighWatermark})
		cs.LagMessages += max(0, r.HighWatermark-c.NextOffset)
		stalled = stalled || c.Stalled
		dueLag = max(dueLag, c.DueLagSeconds)
	}
	cs.LagComplete = complete
	switch {
	case !complete:
		cs.State = service.ChildIncomplete
	case stalled:
		cs.State = service.ChildStalled
	default:
		cs.State = service.ChildActive
	}
	if ct.FanoutDelayMs > 0 {
		cs.DueLagSeconds = &dueLag
	}
	return cs
}

func findCursor(cs []CursorReport, child, epoch string) (CursorReport, bool) {
	for _, c := range cs {
		if c.Child == child && c.Epoch == epoch {
			return c, true
		}
	}
	return CursorReport{}, false
}

// LocalCursors reports a parent partition this node owns (op 17's owner side): its high
// watermark without opening the log (Node.PeekHighWatermark) and every cursor file beside
// it, with the live state of the cursor the bound runner runs.
func (l *Links) LocalCursors(parent meta.Topic, p int) PartitionCursors {
	var r PartitionCursors
	r.HighWatermark, r.HWMKnown = l.cfg.Node.PeekHighWatermark(parent, p)
	files, err := cursorfile.List(context.Background(), l.cfg.Node.PartitionDir(parent.Name, p))
	if err != nil {
		return r
	}
	for _, f := range files {
		if f.Err != nil || f.Superseded {
			continue
		}
		child, st := f.Child, f.State
		c := CursorReport{Child: child, Epoch: st.Epoch, NextOffset: st.NextOffset}
		if l.status != nil {
			c.Stalled, c.DueLagSeconds = l.status.CursorStatus(parent.Name, p, child)
			if meta.IsRemoteID(child) {
				c.RemoteState, c.LastError, _ = l.status.RemoteStatus(parent.Name, p, child)
			}
		}
		r.Cursors = append(r.Cursors, c)
	}
	return r
}

// remoteListing is the static part of a remote link's children-listing entry (never the
// credentials).
func remoteListing(l meta.RemoteLink) service.ChildStatus {
	return service.ChildStatus{Name: l.Name(), ID: l.ID, Link: "remote", Kind: "remote", DelayMs: l.DelayMs,
		AttachEpoch: l.AttachEpoch, Epoch: l.AttachEpoch, Target: l.Topic, Start: l.Start,
		Cursors: []service.ChildCursor{}, RecoveryPoint: map[string]int64{}}
}

// remoteChildren lists parent's remote links with the reports of its partitions
// (docs/internals/http-api.md §2.13): state = the worst state any running cursor reports
// (incomplete when a partition did not report), recovery_point = each reporting partition's
// cursor position.
func (l *Links) remoteChildren(parent meta.Topic, reports []*PartitionCursors, owners []string) []service.ChildStatus {
	var out []service.ChildStatus
	links := l.cfg.Meta.RemoteLinks(parent.Name)
	for _, ref := range parent.RemoteLinks {
		i := slices.IndexFunc(links, func(l meta.RemoteLink) bool { return l.ID == ref.ID })
		if i < 0 {
			continue
		}
		out = append(out, remoteLinkListing(links[i], reports, owners))
	}
	return out
}

// remoteLinkListing is remote link's listing entry from its parent's partition reports.
func remoteLinkListing(link meta.RemoteLink, reports []*PartitionCursors, owners []string) service.ChildStatus {
	cs := remoteListing(link)
	complete, state, lastErr := true, RemoteActive, ""
	var dueLag float64
	for p, r := range reports {
		if r == nil || !r.HWMKnown {
			complete = false
			continue
		}
		c, found := findCursor(r.Cursors, link.ID, link.AttachEpoch)
		if !found {
			complete = false
			continue
		}
		cs.Cursors = append(cs.Cursors, service.ChildCursor{ParentPartition: p, OwnerNode: owners[p],
			NextOffset: c.NextOffset, HighWatermark: r.HighWatermark})
		cs.RecoveryPoint[strconv.Itoa(p)] = c.NextOffset
		cs.LagMessages += max(0, r.HighWatermark-c.NextOffset)
		dueLag = max(dueLag, c.DueLagSeconds)
		if c.RemoteState != "" && c.RemoteState != RemoteActive && remoteRank(c.RemoteState) > remoteRank(state) {
			state, lastErr = c.RemoteState, c.LastError
		} else if lastErr == "" && c.LastError != "" && state == RemoteActive {
			lastErr = c.LastError
		}
	}
	cs.LagComplete = complete
	if !complete && state == RemoteActive {
		state = service.ChildIncomplete
	}
	cs.State, cs.LastError = state, lastErr
	cs.DueLagSeconds = &dueLag
	return cs
}

// remoteRank orders link states: the listing shows the most severe one.
func remoteRank(s string) int {
	switch s {
	case RemoteRejected:
		return 8
	case RemoteNotAllowedHost:
		return 7
	case RemoteRedirectRefused:
		return 6
	case RemoteUnauthorized:
		return 5
	case RemoteTopicMissing:
		return 4
	case RemoteUnreachable:
		return 3
	case RemoteBehindRetention:
		return 2
	case RemoteActive:
		return 1
	}
	return 0
}
