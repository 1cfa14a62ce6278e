// Package partition is the owner side of this node's partition logs: the Registry of open
// partitions (docs/internals/storage-format.md §11) and the produce gate, the checks a commit
// passes before it appends (docs/internals/produce-path.md §8, §9).
//
// A Partition is one open partition log with its consume shard and its move handoff freeze.
// The Registry opens a partition lazily on Get (recovering its log), hands out the same
// Partition until it closes, and closes it when ownership moves away, the topic is deleted,
// the log fails, it is idle, or the node stops. Everything it needs from the rest of the node
// (the data-directory layout, log options, metrics, clock, the local replica's topic records
// and ownership, the commit-time floor, peer wake-ups) comes in Deps; the package knows
// nothing of the engine, HTTP or the metastore's writes.
//
// Invariants:
//
//   - Lock order: a partition's produce lock (commitMu) → its shardMu → the shard's own lock.
//     The registry's map lock is never held while a partition lock is taken.
//   - Get stamps the partition's access time (idle eviction reads it); Peek never opens a
//     log and never stamps, so status reads cannot keep a log open or open a closed one.
//   - A directory is opened only under the topic's open guard held shared, after re-checking
//     that the local replica still names the incarnation and this node as owner; whoever
//     purges or replaces a topic's directories holds the guard exclusively (Guard).
//   - Once a partition is closed no shard attaches (ShardOf refuses with log.ErrClosed), its
//     handoff freeze has ended and its waiters were woken.
//   - While a partition's handoff freeze is active it appends nothing and its shard, whenever
//     one exists, is frozen. A freeze is created only by ArmFreeze; a token can only move the
//     deadline of the freeze it names (RenewFreeze).
//   - A replicated partition's log is open on every replica (Deps.Replicates), but only the
//     owner, its leader, commits (CommitReplicated: append under the produce lock, wait for
//     the HWM outside it) and serves consumers (docs/internals/replication.md §4).
//   - Commit checks ownership and the freeze before the produce lock and again under it, so a
//     refused commit appends nothing; commit times never decrease along a partition within
//     the process (the floor, Deps.RaiseFloor, outlives a log's close and reopen).
//
// Files: registry.go (Deps, Registry: open, Get, Peek, ShardOf, close, directories),
// partition.go (Partition and its accessors, the poller's head cache), freeze.go (the handoff
// freeze's state: arm, end, renew, lapse), commit.go (the produce gate and the locked log
// commit), lifecycle.go (what the engine's loops call: lease purge, closing lost partitions,
// idle eviction, retention of open logs), adapters.go (a log as the consume engine's source,
// storage and shard observers feeding metrics).
package partition
