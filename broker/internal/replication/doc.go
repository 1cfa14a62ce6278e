// Package replication runs this node's part of every replicated partition
// (docs/internals/replication.md §4–§7): from the assignments in the local metastore replica it
// takes up a leadership (opening the log, recording the new epoch in the leader-epoch file,
// serving followers through replica.Host, keeping the ISR in the metastore in step with its
// followers) or follows the leader (a fetch loop per partition), and it ends what the
// assignments no longer give this node.
//
// Invariants:
//
//   - At most one role per partition: a leadership and a follower loop of the same partition
//     never run together; a role of an older epoch is ended before the new one starts.
//   - A leadership is served (replica.Host) only after its epoch is in the leader-epoch file.
//   - The ISR in the metastore changes only through op 23 (SetISR) proposed by the leader of
//     the current epoch, and the leader counts a proposed ISR for its HWM before proposing it
//     (replica.Leader.ProposingISR).
//   - Losing a leadership closes the partition (log and consume shard); the follower loop
//     reopens the log, so no lease or consumer state of the old leadership survives it.
//
// Everything is driven by Manager.Run: a pass on every metastore event (Kick) and every Tick.
package replication
