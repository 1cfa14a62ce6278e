// Package replica is the data path of a replicated partition on one node
// (docs/internals/replication.md §4–§7): the leader's view of its followers (Leader) and a
// follower's fetch loop (Follower). It knows nothing of the metastore, node RPC or HTTP: the
// engine feeds it the assignment (epoch, replicas, ISR) and gives it a log and a way to reach
// the leader.
//
// Leader invariants:
//
//   - The HWM is the lowest log end offset (LEO) over the ISR, the leader's own included, and
//     it moves only while the ISR has at least MinISR members; it never moves back.
//   - A follower's LEO is what its last fetch asked for: a follower fetches from its own LEO
//     after its appends are fsynced, so the leader never counts a record a follower has not
//     made durable.
//   - Every call carries the leader epoch it was made under; a call of another epoch is
//     refused (ErrStaleEpoch), and once deposed a Leader refuses everything and wakes every
//     waiter with ErrDeposed.
//
// Follower invariants:
//
//   - Before it appends the first record of an epoch, the epoch is in the partition's
//     leader-epoch file (log.Epochs).
//   - Before it fetches under a new leader it truncates its log to where it diverges from the
//     leader (the end of its last epoch as the leader knows it), never below its HWM.
//   - Its HWM is the leader's, capped at its own LEO.
package replica
