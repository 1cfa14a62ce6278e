package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/transfer"
)

// Fault points.
const (
	// FaultBeforeAnchor fires after the leader confirmed the epoch and before the anchor is
	// written: an error (or crash) there leaves no file, and the next start anchors again.
	FaultBeforeAnchor = "fanout.before_anchor"
	// FaultAfterChildCommit fires after every bucket of a slab committed and before the cursor
	// file advances: a crash there re-sends the slab (duplicates, never a gap).
	FaultAfterChildCommit = "fanout.after_child_commit"
)

// Sentinel errors of a cursor's exit. The Runner restarts a cursor that is still desired on a
// later tick.
var (
	// ErrUnconfirmed: an anchor was needed but the leader did not confirm this link's epoch
	// (unreachable, or it disagrees). Nothing was written (docs/internals/fanout.md §5, docs/internals/fanout.md §10).
	ErrUnconfirmed = errors.New("fanout: anchor not confirmed by the leader")
	// errParentLog: the host could not provide the parent log (not owner, topic gone, open
	// failure); the cursor stops.
	errParentLog = errors.New("fanout: parent log unavailable")
)

// startOffset is where a cursor with no usable file starts (docs/internals/fanout.md §5 rows 2, 3; rows 4–5 are
// decided by legacyStart): attach_offsets[p] exactly; 0 for a partition added after the
// attach; legacy = true for a link without attach offsets.
func startOffset(attachOffsets []int64, p int) (off int64, legacy bool) {
	switch {
	case attachOffsets == nil:
		return 0, true
	case p < len(attachOffsets):
		return attachOffsets[p], false
	default:
		return 0, false
	}
}

// start opens the cursor file and returns the position to resume from (docs/internals/fanout.md §5 row 1), or
// anchors a new one (rows 2–5) when the file is missing, of another epoch, or corrupt.
func (c *cursor) start(ctx context.Context) (int64, error) {
	path := cursorfile.Path(c.d.Dir, c.d.Child)
	w, st, err := cursorfile.Open(ctx, c.d.Dir, c.d.Child)
	switch {
	case err == nil && st.Epoch == c.d.Epoch:
		c.w = w
		return st.NextOffset, nil
	case err == nil:
		w.Close() // never resume another attachment's position (docs/internals/fanout.md §10)
		c.log.Info("fanout cursor file belongs to another epoch; anchoring", "file_epoch", st.Epoch)
	case errors.Is(err, cursorfile.ErrNotExist):
	case errors.Is(err, cursorfile.ErrCorrupt):
		c.log.Error("fanout cursor file corrupt; anchoring at the attach point", "path", path, "err", err)
		c.obs.CursorCorrupt(c.d.Parent, c.d.Child, c.d.Partition)
	default:
		return 0, err
	}
	return c.anchor(ctx)
}

// anchor writes the starting position after the leader confirmed the link's epoch, before any
// record is fanned out (docs/internals/fanout.md §5). Unconfirmed → ErrUnconfirmed, no file touched.
func (c *cursor) anchor(ctx context.Context) (int64, error) {
	epoch, attached, err := c.host.LeaderLink(ctx, c.d.Parent, c.d.Child)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	if !attached || epoch != c.d.Epoch {
		return 0, fmt.Errorf("%w: leader has attached=%t epoch %q", ErrUnconfirmed, attached, epoch)
	}
	pos, legacy := startOffset(c.d.AttachOffsets, c.d.Partition)
	tail := false
	if legacy {
		var err error
		if pos, tail, err = c.legacyStart(); err != nil {
			return 0, err
		}
	}
	if err := faults.Check(FaultBeforeAnchor); err != nil {
		return 0, fmt.Errorf("fanout: before anchor: %w", err)
	}
	w, err := cursorfile.Anchor(c.d.Dir, c.d.Child, c.d.Epoch, pos)
	if err != nil {
		return 0, err
	}
	c.w = w
	c.log.Info("fanout cursor anchored", "offset", pos, "legacy_tail", tail)
	return pos, nil
}

// legacyStart is where a link without attach offsets starts (docs/internals/fanout.md §5 rows 4–5): the parent
// partition's oldest retained offset when its move.marker lists this (child, epoch) — the
// link existed when a move installed the copy, so its records must not be skipped — else the
// live tail (HWM). A marker that cannot be decoded vouches for nothing either way; the
// cursor then starts at the oldest offset, erring towards duplicates (docs/internals/fanout.md §5).
func (c *cursor) legacyStart() (pos int64, tail bool, err error) {
	lg, err := c.openLog()
	if err != nil {
		return 0, false, err
	}
	m, found, err := transfer.ReadMarker(c.d.Dir)
	switch {
	case errors.Is(err, transfer.ErrBadMarker):
		c.log.Error("fanout move marker unreadable; starting at the oldest retained offset", "dir", c.d.Dir, "err", err)
		return lg.OldestOffset(), false, nil
	case err != nil:
		return 0, false, fmt.Errorf("fanout: read move marker: %w", err)
	case found && slices.Contains(m.Links, transfer.Link{Child: c.d.Child, Epoch: c.d.Epoch}):
		return lg.OldestOffset(), false, nil
	}
	return lg.HighWatermark(), true, nil
}
