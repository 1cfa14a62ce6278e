package service

import "time"

// ProduceRecord is one message to accept. Partition < 0 means not pinned.
type ProduceRecord struct {
	Key       string
	Partition int
	Payload   []byte
}

// ConsumeRequest selects the consume mode: Offset >= 0 (with Partition >= 0) is a replay of
// up to Max records; Partition >= 0 alone is a pinned queue consume; neither is a queue
// consume. Wait is already clamped. Max is 1 … 1000.
type ConsumeRequest struct {
	Partition int
	Offset    int64
	Wait      time.Duration
	Max       int
	// LocalOnly is set only on the node-to-node plane: serve what this node owns, never
	// forward (a queue probe from another node, or a forwarded pinned/replay read).
	LocalOnly bool
	// Epoch, on the node-to-node plane, is the leader epoch a pinned partition of a
	// replicated topic was addressed under (docs/internals/replication.md §7).
	Epoch LeaderEpoch
	// Taken, on the node-to-node plane, is how many key and payload bytes the answer a
	// queue probe contributes to holds already: the owner adds no message that would take
	// it past the answer's byte bound (docs/internals/consume-and-leases.md §4).
	Taken int
}

// LeaderEpoch is a leader epoch a node-to-node request names, or none (Set false: an
// unreplicated partition, or a sender that predates epochs). Epoch 0 is a real epoch.
type LeaderEpoch struct {
	Set   bool
	Value uint64
}

// EpochOf is the LeaderEpoch value v, set.
func EpochOf(v uint64) LeaderEpoch { return LeaderEpoch{Set: true, Value: v} }

// Message is one delivered record. ReceiptHandle is empty on replay.
type Message struct {
	Topic         string
	Partition     int
	Offset        int64
	Key           []byte // nil/empty = keyless
	Payload       []byte
	CommittedAtMs int64
	ReceiptHandle string
}

// AckOp is what an ack request does to a lease.
type AckOp int

// Ack operations (docs/internals/http-api.md §2.11).
const (
	OpAck AckOp = iota
	OpExtend
	OpNack
)

// AckEntry is one parsed, range-checked ack/extend/nack.
type AckEntry struct {
	Partition int
	Offset    int64
	Nonce     uint64
	Op        AckOp
	// Epoch, on the node-to-node plane, is the leader epoch of a replicated partition the
	// entry was addressed under (docs/internals/replication.md §7).
	Epoch LeaderEpoch
}
