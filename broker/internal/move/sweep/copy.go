package sweep

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"time"

	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// Quarantine reasons (docs/internals/moves.md §9.3 a–d, §9.4); they appear in the decision log lines.
const (
	ReasonOwnerListsNoRecords   = "owner_lists_no_records"            // a
	ReasonOwnerHasNoMarker      = "owner_has_no_marker"               // b
	ReasonMarkerFromAnotherNode = "owner_marker_from_another_node"    // c
	ReasonSegmentNotOnOwner     = "segment_missing_or_short_on_owner" // d
	ReasonOwnerMarkerUnreadable = "owner_marker_unreadable"           // treated like b
	ReasonAheadOfVouched        = "ahead_of_vouched_position"         // §9.4: next > V
	ReasonUnrecoverable         = "copy_does_not_recover"             // §9.4: recovery failed
)

// localSegment is one segment file of the local copy.
type localSegment struct {
	base      int64
	size      int64
	unexpired bool // holds record bytes retention has not expired
}

// sweepCopy judges the local copy of (t, p), t being the topic record read before anything
// else (docs/internals/moves.md §9.1).
func (s *Sweeper) sweepCopy(ctx context.Context, t meta.Topic, p int) {
	self := s.cfg.NodeID
	inc := t.Incarnation
	if a, ok := s.cfg.Store.Assignment(t.Name, p); !ok || a.Owner == "" || holds(a, self) {
		return // ours (owner, a replica or the target of a move), or unassigned: not a stale copy
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	a, found, err := s.cfg.Store.ConfirmAssignment(cctx, t.Name, p)
	if err != nil || !found || a.Owner == "" || holds(a, self) {
		if err != nil {
			s.log.Debug("sweep: ownership unconfirmed; deferring", "topic", t.Name, "partition", p, "err", err)
		}
		return
	}
	// Re-check the local state after the confirmation (docs/internals/metastore.md §13 rule 2).
	if cur, ok := s.cfg.Store.Topic(t.Name); !ok || cur.Incarnation != inc {
		return
	}
	if t.RF() >= 2 && len(a.ReplicaSet()) >= 2 {
		s.dropReplica(t, p, a)
		return
	}
	path := s.cfg.Engine.PartitionDir(t.Name, p)
	m, ok := s.cfg.Store.Member(a.Owner)
	if !ok || m.ClusterAddr == "" {
		s.log.Debug("sweep: owner unknown; deferring", "topic", t.Name, "partition", p, "owner", a.Owner)
		return
	}
	lctx, lcancel := s.callCtx(ctx)
	defer lcancel()
	listing, err := s.cfg.Source.List(lctx, m.ClusterAddr, t.Name, p)
	if err != nil {
		s.log.Debug("sweep: owner cannot be asked; deferring", "topic", t.Name, "partition", p, "owner", a.Owner, "err", err)
		return
	}
	if inc != "" && listing.Incarnation != "" && listing.Incarnation != inc {
		return // the owner serves another incarnation: the stale-incarnation path handles this dir
	}
	local, err := listLocal(path, t.RetentionMs, s.cfg.Now())
	if err != nil {
		s.log.Debug("sweep: local copy cannot be listed; deferring", "topic", t.Name, "partition", p, "path", path, "err", err)
		return
	}
	vouched, marker, reason := judge(listing, local, self)
	base := []any{"topic", t.Name, "partition", p, "path", path, "owner", a.Owner, "vouched", vouched}
	if !anyUnexpired(local) {
		s.setAside(t, p, append(base, "reason", "no_unexpired_records"))
		return
	}
	if reason != "" {
		s.setAside(t, p, append(base, "reason", reason))
		return
	}
	if marker.DurableAtMs == 0 {
		installed := time.UnixMilli(marker.InstalledAtMs)
		if s.cfg.Now().Before(installed.Add(s.cfg.LegacyMarkerGrace)) {
			s.log.Debug("sweep: owner's marker has no durable stamp; leaving the copy until the install is older",
				append(base, "installed_at_ms", marker.InstalledAtMs)...)
			return
		}
	}
	if err := faults.Check(FaultBeforeAct); err != nil {
		return
	}
	to, next, err := s.cfg.Engine.ReclaimCopy(t.Name, p, inc, t.RetentionMs, vouched)
	switch {
	case err != nil:
		s.refused(err, base)
	case to == "":
		s.log.Info("sweep: reclaimed a stale copy the owner vouches for", append(base, "next_offset", next)...)
	case next < 0:
		s.log.Error("sweep: stale copy quarantined; an operator must reconcile it",
			append(base, "reason", ReasonUnrecoverable, "quarantined_to", to)...)
	default:
		s.log.Error("sweep: stale copy quarantined; an operator must reconcile it",
			append(base, "reason", ReasonAheadOfVouched, "next_offset", next, "quarantined_to", to)...)
	}
}

// dropReplica removes the copy of a replicated partition whose leader-confirmed replica set
// no longer names this node (docs/internals/replication.md §9): a reassignment drops a
// replica only once every replica it keeps is in the ISR, so the ISR holds every committed
// record and the copy vouches for nothing. The copy is recovered first and removed; one that
// does not recover is quarantined like any other.
func (s *Sweeper) dropReplica(t meta.Topic, p int, a meta.Assignment) {
	if err := faults.Check(FaultBeforeAct); err != nil {
		return
	}
	base := []any{"topic", t.Name, "partition", p, "leader", a.Owner, "replicas", a.ReplicaSet()}
	to, next, err := s.cfg.Engine.ReclaimCopy(t.Name, p, t.Incarnation, t.RetentionMs, math.MaxInt64)
	switch {
	case err != nil:
		s.refused(err, base)
	case to == "":
		s.log.Info("sweep: removed the copy of a replica this node no longer holds", append(base, "next_offset", next)...)
	default:
		s.log.Error("sweep: stale copy quarantined; an operator must reconcile it",
			append(base, "reason", ReasonUnrecoverable, "quarantined_to", to)...)
	}
}

// setAside quarantines the copy without recovering it (or removes one without unexpired
// records) and logs the decision.
func (s *Sweeper) setAside(t meta.Topic, p int, attrs []any) {
	if err := faults.Check(FaultBeforeAct); err != nil {
		return
	}
	to, err := s.cfg.Engine.SetAsideCopy(t.Name, p, t.Incarnation, t.RetentionMs)
	switch {
	case err != nil:
		s.refused(err, attrs)
	case to == "":
		s.log.Info("sweep: removed a stale copy without unexpired records", attrs...)
	default:
		s.log.Error("sweep: stale copy quarantined; an operator must reconcile it",
			append(attrs, "quarantined_to", to)...)
	}
}

// refused logs an engine step that did not act.
func (s *Sweeper) refused(err error, attrs []any) {
	switch {
	case errors.Is(err, os.ErrNotExist):
		// gone meanwhile: nothing to do
	case errors.Is(err, transfer.ErrIncarnationChanged):
		s.log.Info("sweep: left a copy whose topic dir now belongs to another incarnation", append(attrs, "err", err)...)
	default:
		s.log.Warn("sweep: could not act on a stale copy", append(attrs, "err", err)...)
	}
}

// judge computes the position the owner vouches for, V = owner HWM capped at the owner
// marker's hwm (docs/internals/moves.md §9.2), and the reason to quarantine without recovering, "" when
// none of §9.3 a–d holds. It assumes the local copy holds unexpired records.
func judge(l transfer.Listing, local []localSegment, self string) (vouched int64, marker transfer.Marker, reason string) {
	vouched = l.HighWatermark
	if len(l.Marker) > 0 {
		m, err := transfer.DecodeMarker(l.Marker)
		if err != nil {
			return vouched, transfer.Marker{}, ReasonOwnerMarkerUnreadable
		}
		marker = m
		vouched = min(vouched, m.HWM)
	}
	switch {
	case l.HighWatermark == 0 || l.Bytes() == 0: // a
		return vouched, marker, ReasonOwnerListsNoRecords
	case len(l.Marker) == 0: // b
		return vouched, marker, ReasonOwnerHasNoMarker
	case marker.From != self: // c
		return vouched, marker, ReasonMarkerFromAnotherNode
	}
	owner := make(map[int64]transfer.Segment, len(l.Segments))
	for _, sg := range l.Segments {
		owner[sg.Base] = sg
	}
	for _, ls := range local { // d
		if !ls.unexpired || ls.base >= vouched {
			continue
		}
		o, ok := owner[ls.base]
		if !ok || (o.Sealed && o.Size < ls.size) {
			return vouched, marker, ReasonSegmentNotOnOwner
		}
	}
	return vouched, marker, ""
}

// listLocal lists the segment files of the local copy at path without opening it as a log,
// judging each by the topic's retention (docs/internals/storage-format.md §10: expired when retention > 0 and mtime <
// now − retention; an empty segment holds no records).
func listLocal(path string, retentionMs int64, now time.Time) ([]localSegment, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []localSegment
	for _, e := range ents {
		base, ok := plog.ParseSegmentFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		expired := retentionMs > 0 && fi.ModTime().Before(now.Add(-time.Duration(retentionMs)*time.Millisecond))
		out = append(out, localSegment{base: base, size: fi.Size(), unexpired: fi.Size() > 0 && !expired})
	}
	return out, nil
}

func anyUnexpired(local []localSegment) bool {
	for _, l := range local {
		if l.unexpired {
			return true
		}
	}
	return false
}

// holds reports whether a gives the partition's data to node: it owns (leads) it, is one of
// its replicas (docs/internals/replication.md §1) or is the target of its move.
func holds(a meta.Assignment, node string) bool {
	return a.Owner == node || a.Target == node || slices.Contains(a.ReplicaSet(), node)
}
