package log

import "errors"

// Sentinel errors callers branch on. Functions wrap them with context; use errors.Is.
var (
	// ErrCorruptRecord reports an offset inside a frame that fails its CRC or decode, or inside
	// a gap left by recovery around a damaged frame (docs/internals/storage-format.md §11). Also returned by the
	// envelope and frame decoders for malformed input.
	ErrCorruptRecord = errors.New("log: corrupt record")
	// ErrOffsetOutOfRange reports an offset below the oldest retained offset.
	ErrOffsetOutOfRange = errors.New("log: offset below oldest retained offset")
	// ErrNotVisible reports an offset at or above the high watermark (not yet committed).
	ErrNotVisible = errors.New("log: offset not yet visible")
	// ErrFailed reports a log in failed state (docs/internals/storage-format.md §6): a failed commit could not
	// be rolled back, or the HWM file could not be persisted. Every later Commit returns it
	// until the log is closed and reopened, which lets recovery decide the tail.
	ErrFailed = errors.New("log: failed state, close and reopen")
	// ErrClosed reports a call on a closed log.
	ErrClosed = errors.New("log: closed")
	// ErrEmptyBatch reports a Commit with no entries.
	ErrEmptyBatch = errors.New("log: empty commit batch")
	// ErrRecordTooLarge reports a record whose framed size exceeds the writer's frame split
	// bound (maxFrameBytes/2, docs/internals/storage-format.md §3). Nothing is written.
	ErrRecordTooLarge = errors.New("log: record too large")
	// ErrVerify reports that re-reading a commit's frames found a mismatch (VerifyDurable).
	ErrVerify = errors.New("log: durability verify failed")
	// ErrCorruptHWM reports an `hwm` file that is neither empty, 8 (legacy) nor 16 bytes with
	// a valid CRC. Open fails loudly on it (docs/internals/storage-format.md §7.2).
	ErrCorruptHWM = errors.New("log: corrupt hwm file")
)
