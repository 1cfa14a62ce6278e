package consume

import (
	"errors"
	"time"
)

// Sentinel errors. Callers branch on them with errors.Is; the API layer maps them to statuses
// (docs/internals/http-api.md §2.11): ErrStale → 410, ErrAckedAheadFull → 503.
var (
	// ErrCorrupt is returned by a Source when the record at an offset is permanently unreadable.
	// The shard skips it (docs/internals/consume-and-leases.md §8).
	ErrCorrupt = errors.New("record permanently unreadable")
	// ErrAgedOut is returned by a Source when the offset is below its oldest retained offset.
	ErrAgedOut = errors.New("offset aged out of retention")
	// ErrStale means no live reservation matches the handle: it expired, was superseded, was
	// already acked or nacked, or the shard is gone. Never retried by the client.
	ErrStale = errors.New("no live reservation for handle")
	// ErrAckedAheadFull means an out-of-order ack found the acked-ahead window full. The
	// reservation is kept; the client retries with back-off.
	ErrAckedAheadFull = errors.New("acked-ahead window full")
)

// Message is one record handed to a consumer.
type Message struct {
	Offset      int64
	Key         []byte
	CommittedAt int64 // unix milliseconds, stamped by the owner at commit
	Payload     []byte
}

// Source is the partition log as the consume engine sees it; an adapter over the log package
// maps the log's errors onto ErrCorrupt and ErrAgedOut (this package never imports the log).
//
// Concurrency: every method may be called from any goroutine, concurrently with commits.
// The shard calls HighWatermark and OldestOffset with its lock held (they must be cheap and
// must not call back into the shard); Read and Broadcast are called without it.
type Source interface {
	// HighWatermark is one past the last visible offset.
	HighWatermark() int64
	// OldestOffset is the lowest offset still retained.
	OldestOffset() int64
	// Read returns the record at offset, ErrCorrupt if it can never be read, ErrAgedOut if
	// retention removed it; any other error is treated as transient.
	Read(offset int64) (Message, error)
	// Broadcast wakes every long-poll waiter parked on the partition.
	Broadcast()
}

// Observer receives the consume engine's metric events for one shard. Methods are called
// without the shard lock held and must be cheap. A nil Observer is allowed.
type Observer interface {
	CorruptSkipped()           // narad_consumer_corrupt_skipped_total
	AckRejected(reason string) // narad_ack_rejected_total{reason="stale"|"cap"}
	Extended()                 // narad_ack_extended_total
	Nacked()                   // narad_nack_total
}

// AgedOutObserver is optionally implemented by an Observer to count messages that were never
// delivered because retention removed them first (narad_consumer_dropped_messages).
type AgedOutObserver interface {
	AgedOut(n int64)
}

// Rejection reasons passed to Observer.AckRejected.
const (
	RejectStale = "stale"
	RejectCap   = "cap"
)

// Defaults applied when a Limits field is zero or negative (docs/internals/consume-and-leases.md §11).
const (
	DefaultVisibilityTimeout = 30 * time.Second // lease length; extend restarts a full window
	DefaultMaxInFlight       = 1024             // live reservations per partition
	DefaultMaxAckedAhead     = 1024             // out-of-order acks parked above the frontier
	DefaultMaxBytes          = 8 << 20          // key and payload bytes of one consume answer
)

// Limits are a topic's live consume settings, passed on every call so a topic alter takes
// effect at once.
type Limits struct {
	VisibilityTimeout time.Duration // lease length; ≤ 0 → DefaultVisibilityTimeout
	MaxInFlight       int           // ≤ 0 → DefaultMaxInFlight
	MaxAckedAhead     int           // ≤ 0 → DefaultMaxAckedAhead
	// MaxBytes bounds the key and payload bytes of one consume answer (Reserve's taken
	// counts those other partitions put in it). ≤ 0 → DefaultMaxBytes.
	MaxBytes int
	// Take, when set, is asked for each message's key and payload bytes before the message
	// joins the answer (the node's answer budget); false ends the answer as MaxBytes does,
	// also before its first message.
	Take func(n int) bool
}

func (l Limits) normalized() Limits {
	if l.VisibilityTimeout <= 0 {
		l.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.MaxAckedAhead <= 0 {
		l.MaxAckedAhead = DefaultMaxAckedAhead
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Delivery is one reserved message and the handle that settles it.
type Delivery struct {
	Message Message
	Handle  Handle
}

// Outcome says why Reserve returned what it did.
type Outcome int

const (
	// Reserved: at least one message was reserved.
	Reserved Outcome = iota
	// Empty: nothing reservable below the high watermark.
	Empty
	// Capped: flow control — the in-flight cap is reached, or the acked-ahead window is full
	// and the frontier hole is already out.
	Capped
	// Frozen: the partition is frozen for a handoff; nothing new is handed out.
	Frozen
)

// String names the outcome for logs and metrics.
func (o Outcome) String() string {
	switch o {
	case Reserved:
		return "reserved"
	case Empty:
		return "empty"
	case Capped:
		return "capped"
	case Frozen:
		return "frozen"
	}
	return "unknown"
}
