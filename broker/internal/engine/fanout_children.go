package engine

import (
	"context"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// CursorStatus reports the live state of a running cursor (stalled on a child partition whose
// owner does not answer; due lag of a delay child). The fan-out runner installs it.
type CursorStatus func(parent string, partition int, child string) (stalled bool, dueLagSeconds float64)

// FanoutStatus is the fan-out runner's live view of the cursors it runs (*fanout.Runner).
type FanoutStatus interface {
	CursorStatus(parent string, partition int, child string) (stalled bool, dueLagSeconds float64)
	RemoteStatus(parent string, partition int, id string) (state, lastErr string, ok bool)
}

// BindFanout binds the fan-out runner whose live cursor state the children listing shows.
// It is the engine's one late-bound collaborator: the runner is built over this engine's
// FanoutHost, so it cannot exist before New and be passed in Config. Call it once, before Run
// and before the HTTP listener starts; without it the listing shows file state only.
func (e *Engine) BindFanout(r FanoutStatus) {
	e.cursorStatus = r.CursorStatus
	e.remoteStatus = r.RemoteStatus
}

// Children implements api.FanoutBackend (docs/internals/http-api.md §2.13): every parent partition reports its high
// watermark and cursor positions, locally or from its owner (op 17, 16 in flight); a partition
// that cannot report makes its children's listing incomplete. Nothing opens a partition log.
func (e *Engine) Children(ctx context.Context, parent meta.Topic) []service.ChildStatus {
	n := parent.Partitions
	reports := make([]*PartitionCursors, n)
	owners := make([]string, n)
	fanIn(n, func(p int) {
		o := e.ownerOf(parent.Name, p)
		owners[p] = o.id
		switch {
		case o.local:
			r := e.LocalFanoutCursors(parent, p)
			reports[p] = &r
		case o.known && !o.dead && o.addr != "" && e.peers != nil:
			sctx, cancel := context.WithTimeout(ctx, statsTimeout)
			defer cancel()
			if r, err := e.peers.FanoutCursors(sctx, o.addr, parent.Name, p); err == nil {
				reports[p] = &r
			}
		}
	})

	out := make([]service.ChildStatus, 0, len(parent.Children))
	for _, name := range parent.Children {
		ct, ok := e.view.Topic(name)
		if !ok || ct.Parent != parent.Name {
			continue
		}
		cs := service.ChildStatus{Name: name, Link: "local", DelayMs: ct.FanoutDelayMs, AttachEpoch: ct.AttachEpoch,
			Cursors: []service.ChildCursor{}}
		complete, stalled := true, false
		var dueLag float64
		for p := range n {
			r := reports[p]
			if r == nil || !r.HWMKnown {
				complete = false
				continue
			}
			c, found := findCursor(r.Cursors, name, ct.AttachEpoch)
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
		out = append(out, cs)
	}
	return append(out, e.remoteChildren(parent, reports, owners)...)
}

func findCursor(cs []CursorReport, child, epoch string) (CursorReport, bool) {
	for _, c := range cs {
		if c.Child == child && c.Epoch == epoch {
			return c, true
		}
	}
	return CursorReport{}, false
}

// LocalFanoutCursors reports a parent partition this node owns (op 17's owner side): its
// high watermark without opening the log (an open log from memory, a closed one from its
// directory, unknown when the hwm file holds no boundary) and every cursor file beside it.
func (e *Engine) LocalFanoutCursors(parent meta.Topic, p int) PartitionCursors {
	var r PartitionCursors
	dir := e.parts.PartitionDir(parent.Name, p)
	switch pt := e.parts.Peek(parent.Name, p); {
	case pt != nil && pt.Incarnation() == parent.Incarnation:
		r.HighWatermark, r.HWMKnown = pt.Log().HighWatermark(), true
	case !dirExists(dir):
		r.HWMKnown = true // nothing was ever committed here: the directory does not exist
	case e.parts.MarkerMatches(parent):
		if st, err := plog.PeekDir(dir); err == nil && st.Exact {
			r.HighWatermark, r.HWMKnown = st.HighWatermark, true
		}
	}
	files, err := cursorfile.List(context.Background(), dir)
	if err != nil {
		return r
	}
	for _, f := range files {
		if f.Err != nil || f.Superseded {
			continue
		}
		child, st := f.Child, f.State
		c := CursorReport{Child: child, Epoch: st.Epoch, NextOffset: st.NextOffset}
		if e.cursorStatus != nil {
			c.Stalled, c.DueLagSeconds = e.cursorStatus(parent.Name, p, child)
		}
		if meta.IsRemoteID(child) && e.remoteStatus != nil {
			c.RemoteState, c.LastError, _ = e.remoteStatus(parent.Name, p, child)
		}
		r.Cursors = append(r.Cursors, c)
	}
	return r
}
