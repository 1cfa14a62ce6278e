// Package fanout copies a parent topic's committed records into its children (docs/internals/fanout.md).
//
// One Runner per node reconciles, once a second, the cursors the local metadata replica wants
// (every link × every parent partition this node owns, Host.DesiredCursors) against the cursor
// goroutines it runs (the tick loop and the keyed worker set come from package reconcile,
// shared with the move runner). A cursor tails one parent partition's log for one child: it
// reads a slab (≤ 4,096 records / 4 MiB, 25 ms linger), buckets it by child partition (counting sort,
// FNV-1a-32 of the key, keyless records keep the parent index when the partition counts match),
// commits the buckets through Host.CommitChild (≤ 16 in flight, quick retries, then held
// failed buckets retried alone every second) and only then advances its cursor file
// (cursorfile.Writer, one in-place write + fdatasync).
//
// # Invariant
//
// A cursor's durable next_offset never passes a record the child has not committed
// (seed: commit before advance). A crash between the child commits and the advance re-sends the
// last slab: duplicates in the child, never a gap. Anchoring a new position (no file, another
// epoch's file, a corrupt file) is the only destructive move and happens only after the Raft
// leader confirmed the link's epoch (Host.LeaderLink), before any record is fanned out.
//
// # Host boundary
//
// The package knows nothing of the metastore, RPC or the engine: the engine implements Host
// (metadata reads, log registry, child commits) and Observer (metrics). See host.go.
//
// Fault points (faults.Check): FaultBeforeAnchor, FaultAfterChildCommit.
package fanout
