package transfer

import (
	"errors"
	"time"

	"narad.dev/broker/internal/errcode"
)

// Move constants shared by both sides (docs/internals/moves.md §16).
const (
	FreezeTTL       = 30 * time.Second       // a freeze lapses this long after its last arm or re-arm
	LeaseDrainBound = 500 * time.Millisecond // PrepareHandoff waits at most min(this, ttl/4) for leases
	ChunkBytes      = 1 << 20                // FetchSegmentChunk reads at most this much
	FutureMtimeSkew = time.Hour              // a segment mtime further ahead of listed_at is ignored
)

// Segment is one segment of a transfer listing. Size is the committed size: for the
// boundary segment the committed boundary position, for sealed ones the file size.
type Segment struct {
	Base    int64 `json:"base_offset"`
	Size    int64 `json:"size_bytes"`
	Sealed  bool  `json:"sealed"`
	MtimeMs int64 `json:"mtime_ms,omitempty"` // 0: not reported (older source)
}

// EpochEntry says that the source's records from Start on were written under leader epoch
// Epoch (its leader-epoch file, docs/internals/storage-format.md §19).
type EpochEntry struct {
	Epoch uint64 `json:"epoch"`
	Start int64  `json:"start_offset"`
}

// Cursor is one fan-out cursor file shipped as a sidecar: the raw record, CRC-verified by
// the source before shipping and again by the destination before installing.
type Cursor struct {
	Child  string `json:"child"`
	Record []byte `json:"record"`
}

// Listing is a source's transfer info (docs/internals/moves.md §4.1). The source reads the consumer
// frontier and the cursors first, then the HWM, then the segments, so no position in a
// listing is ahead of the bytes it lets the destination copy.
type Listing struct {
	Segments        []Segment `json:"segments"`
	ListedAtMs      int64     `json:"listed_at_ms,omitempty"` // source wall clock; 0: older source
	HighWatermark   int64     `json:"high_watermark"`
	OldestOffset    int64     `json:"oldest_offset"`
	CommittedOffset int64     `json:"committed_offset"` // consumer frontier (-1: nothing acked)
	HasCommitted    bool      `json:"has_committed"`
	AckedAhead      []int64   `json:"acked_ahead,omitempty"`
	Cursors         []Cursor  `json:"fanout_cursors,omitempty"`
	Marker          []byte    `json:"move_marker,omitempty"` // raw move.marker of the source's copy
	Incarnation     string    `json:"incarnation"`
	Token           string    `json:"token,omitempty"`      // only in a PrepareHandoff arm reply
	ExpiresInMs     int64     `json:"expires_in,omitempty"` // re-arm / fence replies: freeze time left
	// Epochs is the source's leader-epoch history when the partition is replicated and open
	// there: a follower's segment pre-copy takes the entries covering what it copies
	// (docs/internals/replication.md §5). Empty: not replicated, closed, or an older source.
	Epochs []EpochEntry `json:"leader_epochs,omitempty"`

	// ReceivedAt is the destination's clock when the listing arrived (set by the RPC client,
	// never sent): segment ages are stamped relative to it (docs/internals/moves.md §6).
	ReceivedAt time.Time `json:"-"`
}

// Bytes returns the total committed bytes the listing covers.
func (l Listing) Bytes() int64 {
	var n int64
	for _, s := range l.Segments {
		n += s.Size
	}
	return n
}

// PrepareRequest is a PrepareHandoff call (op 24, docs/internals/moves.md §3.3): no token arms a new
// freeze; a token re-arms the freeze it names; a token with Fence also requires the source's
// current HWM to equal ExpectHWM.
type PrepareRequest struct {
	Token     string
	Fence     bool
	ExpectHWM int64
	TTL       time.Duration // 0: FreezeTTL
}

// Errors both sides map to and from node-RPC statuses: errcode's sentinels under the names
// the move code uses (errcode.Source is their table).
var (
	// ErrFreezeLapsed, ErrUnknownToken and ErrHWMMismatch are the 409s of a re-arm or fence.
	ErrFreezeLapsed = errcode.ErrFreezeLapsed
	ErrUnknownToken = errcode.ErrUnknownToken
	ErrHWMMismatch  = errcode.ErrHWMMismatch
	// ErrNotOwner (421): the asked node does not own the partition.
	ErrNotOwner = errcode.ErrNotOwner
	// ErrNotFound (404): no such topic or partition (authoritatively, on the asked node).
	ErrNotFound = errcode.ErrNotFound
	// ErrUnavailable (503 or a transport failure): nothing is known about the outcome.
	ErrUnavailable = errcode.ErrUnavailable
)

// FenceRefused reports whether err is one of the 409 refusals of a re-arm or fence.
func FenceRefused(err error) bool {
	return errors.Is(err, ErrFreezeLapsed) || errors.Is(err, ErrUnknownToken) || errors.Is(err, ErrHWMMismatch)
}

// FenceError returns the sentinel for a 409 reason code, or ErrFreezeLapsed for an unknown
// code (a refused fence is a lapsed freeze as far as the destination can tell).
func FenceError(code string) error {
	switch code {
	case ErrUnknownToken.Error():
		return ErrUnknownToken
	case ErrHWMMismatch.Error():
		return ErrHWMMismatch
	}
	return ErrFreezeLapsed
}

// Report is a destination's own view of one move (op 30, docs/internals/http-api.md §2.18 `detail`).
type Report struct {
	ReportedBy     string `json:"reported_by"`
	Phase          string `json:"phase"`
	Passes         int    `json:"passes"`
	CopiedBytes    int64  `json:"copied_bytes"`
	SourceHWM      int64  `json:"source_high_watermark"`
	CopyNextOffset int64  `json:"copy_next_offset"`
	BlockedReason  string `json:"blocked_reason,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	StartedAt      int64  `json:"started_at"` // Unix seconds
}

// Worker phases (docs/internals/moves.md §5.1; docs/internals/http-api.md §2.18 detail.phase).
const (
	PhaseCopying          = "copying"
	PhaseFreezing         = "freezing"
	PhaseFinalizing       = "finalizing"
	PhaseInstalled        = "installed"
	PhaseUnconfirmedFlip  = "unconfirmed_flip"
	PhaseWaitingForSource = "waiting_for_source"
	PhaseBlocked          = "blocked"
)

// Blocked reasons a destination reports.
const (
	BlockedCopyUnverifiable     = "copy_unverifiable"
	BlockedSourceDeadCopyBehind = "source_dead_copy_behind"
)
