package cursorsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"narad.dev/broker/internal/fanout/cursorfile"
)

// Snapshot returns the envelope of the cursor files in partitionDir, the leader's side. A file
// that cannot be read (corrupt, vanished) or a legacy file superseded by a current one is left
// out: the follower keeps no position for it, and a new leader anchors that link again
// (duplicates, never gaps). More than MaxCursors readable files is an error (nothing is sent).
func Snapshot(ctx context.Context, partitionDir string) ([]byte, error) {
	files, err := cursorfile.List(ctx, partitionDir)
	if err != nil {
		return nil, err
	}
	cs := make([]Cursor, 0, len(files))
	for _, f := range files {
		if f.Err != nil || f.Child == "" || f.Superseded {
			continue
		}
		cs = append(cs, Cursor{Child: f.Child, Epoch: f.State.Epoch, NextOffset: f.State.NextOffset})
	}
	slices.SortFunc(cs, func(a, b Cursor) int { return strings.Compare(a.Child, b.Child) })
	cs = slices.CompactFunc(cs, func(a, b Cursor) bool { return a.Child == b.Child })
	return Encode(cs)
}

// Apply stores the leader's snapshot b in partitionDir, the follower's side, through the
// runner's write paths (store), then removes every readable cursor file of a child b does not
// list. A file that fails its check is replaced when b lists its child and left otherwise (its
// child is unknown). No runner may own a cursor in partitionDir meanwhile: only a partition's
// leader runs its cursors, and a follower's directory is never a leader's.
func Apply(ctx context.Context, partitionDir string, b []byte) error {
	cs, err := Decode(b)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(cs))
	for _, c := range cs {
		keep[c.Child] = true
		if err := store(ctx, partitionDir, c); err != nil {
			return fmt.Errorf("cursorsync: store %.40q: %w", c.Child, err)
		}
	}
	files, err := cursorfile.List(ctx, partitionDir)
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.Child == "" || keep[f.Child] && !f.Legacy {
			continue
		}
		if err := cursorfile.Remove(f.Path); err != nil {
			return fmt.Errorf("cursorsync: remove %s: %w", f.Path, err)
		}
	}
	return nil
}

// store makes c's cursor file hold exactly (c.Epoch, c.NextOffset): nothing when it does, an
// in-place advance (one pwrite and fdatasync, as a running cursor's) when it holds the same
// epoch behind, else a whole new file (cursorfile.Anchor: temp file, fsync, rename, directory
// fsync) — for a missing, corrupt or other epoch's file, or one ahead of the leader's.
func store(ctx context.Context, partitionDir string, c Cursor) error {
	w, st, err := cursorfile.Open(ctx, partitionDir, c.Child)
	switch {
	case err == nil && st.Epoch == c.Epoch && st.NextOffset <= c.NextOffset:
		if st.NextOffset == c.NextOffset && st.Version == 2 {
			return w.Close()
		}
		err = w.Advance(c.NextOffset)
		return errors.Join(err, w.Close())
	case err == nil:
		w.Close()
	case !errors.Is(err, cursorfile.ErrNotExist) && !errors.Is(err, cursorfile.ErrCorrupt):
		return err
	}
	w, err = cursorfile.Anchor(partitionDir, c.Child, c.Epoch, c.NextOffset)
	if err != nil {
		return err
	}
	return w.Close()
}
