// Package cursorsync copies the fan-out cursor positions of a replicated parent partition
// from its leader to its followers (docs/internals/replication.md §8).
//
// The leader takes a Snapshot of the cursor files in its partition directory; the snapshot
// rides on a replica fetch answer, at most once per consumer_state_sync per follower and only
// when it changed. The follower Applies it: each cursor is written as the follower's own
// cursor file through the runner's write paths (an in-place cursorfile.Writer.Advance, or a
// whole new file by cursorfile.Anchor), and a cursor file of a link the leader no longer has is
// removed. A node
// that becomes the leader then resumes each link from the replicated position, which is at
// or behind the one the old leader's children committed: duplicates, never gaps.
//
// # Envelope (version 1)
//
//	version  byte    = 1
//	count    uvarint ≤ MaxCursors
//	count × { uvarint len, child (len bytes), uvarint len, epoch (len bytes), uvarint next_offset }
//
// Every uvarint is minimal (Go's encoding/binary). Children are unique and in strictly
// ascending byte order, so each set of cursors has exactly one encoding. child and epoch obey the cursor file's rules (cursorfile.Encode:
// non-empty printable ASCII without '"', '\\' or, in a child, '/'; at most
// cursorfile.MaxChildLen and cursorfile.MaxEpochLen bytes); next_offset ≤ MaxInt64. Nothing
// may follow the last cursor. An empty set (count 0) is a valid snapshot: the leader has no
// cursor file, and the follower removes its own.
package cursorsync
