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
// The Runner and its cursors know nothing of the metastore, RPC or the engine: they see a
// Host (host.go) and report to an Observer. The node-side implementations live here too, over
// narrow interfaces (node.go; docs/internals/fanout.md §15):
//
//   - NodeHost is the Host of a broker node: desired cursors from the replica's links × the
//     parent partitions this node owns, link currency, leader-confirmed link reads, a remote
//     link's opened password.
//   - MetricsObserver feeds the runner's events into the narad_fanout_* metrics.
//   - Links serves the children endpoints: the attach point and remote start points, remote
//     attach, detach and resolve, the one-shot sealing of passwords stored in clear, and the
//     children listing (partition reports fetched 16 at a time, never opening a log).
//
// What only the engine has comes through Node (replica view, owners, partition dirs, open
// logs, high-watermark reads, the child commit through the produce path); the metastore
// through Metastore (*meta.Store); other nodes through Peers (the node RPC client).
//
// # Invariants of the node side
//
// An attach proposes nothing unless every parent partition's attach or start point was read
// (ErrUnavailable otherwise), so no link starts from a guessed position. A remote password
// leaves the node that took the attach only sealed. The listing never opens a partition log.
//
// Fault points (faults.Check): FaultBeforeAnchor, FaultAfterChildCommit.
package fanout
