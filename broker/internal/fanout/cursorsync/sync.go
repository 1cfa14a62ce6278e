package cursorsync

import (
	"context"
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

// Apply stores the leader's snapshot b in partitionDir, the follower's side: every cursor
// whose file does not already hold exactly its (epoch, next_offset) is written whole
// (cursorfile.Anchor), then every readable cursor file of a child b does not list is removed.
// A file that fails its check is replaced when b lists its child and left otherwise (its
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
		st, err := cursorfile.Read(ctx, cursorfile.Path(partitionDir, c.Child))
		if err == nil && st.Epoch == c.Epoch && st.NextOffset == c.NextOffset && st.Version == 2 {
			continue
		}
		w, err := cursorfile.Anchor(partitionDir, c.Child, c.Epoch, c.NextOffset)
		if err != nil {
			return fmt.Errorf("cursorsync: store %.40q: %w", c.Child, err)
		}
		w.Close()
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
