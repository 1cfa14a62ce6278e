// Package log is Narad's partition log: the durable, offset-addressed record store of one
// topic partition (docs/internals/storage-format.md §2–§11).
//
// A partition directory holds segment files (`%020d.log`, frames back to back, §2–§3) and the
// `hwm` file (§6.2). Records are wrapped in the keyed envelope v2 (§3.1), packed into CRC-32C
// framed batches that are optionally zstd-compressed (§4), appended to the active segment and
// made visible by advancing the high watermark (HWM).
//
// # Invariants
//
//   - next_offset ≥ hwm. Records in [hwm, next_offset) are mid-commit or a hidden tail (§6.5)
//     and are never returned by a read.
//   - The HWM is persisted to the `hwm` file (pwrite + fdatasync) before it advances in memory
//     (seed: persist before advance), and it only ever moves forward while the log is open.
//   - One commit writes whole frames of its own, so the HWM always falls on a frame boundary;
//     the committed boundary (§7) is the end of the last frame below it.
//   - Sealed segments are never written, truncated or re-stamped; only the active (highest
//     base) segment is appended to, and only it may be truncated (failed commit, torn tail).
//     One exception: a replica's TruncateTail cuts a suffix wholly above the HWM, which may
//     delete later segments and make a sealed one active again (storage-format.md §20).
//
// # Writer model
//
// A replicated partition splits the commit in two (replica.go): Append / AppendFrames write
// to the hidden tail, AdvanceHWM publishes (docs/internals/storage-format.md §20). A follower
// catching up appends with AppendFramesDirect (direct.go): the same file, fsync and verify,
// with the whole blocks written and re-read by direct I/O.
//
// Single writer = the holder of the write lock. Every write in Narad is a commit (the
// dispatcher's owner-side commit, docs/internals/produce-path.md §8), so there is no background flusher
// goroutine and no in-memory append buffer: Commit encodes, writes, fsyncs, verifies, persists
// the HWM and advances it synchronously while holding the log's write mutex. Concurrent
// Commit callers are serialized by that mutex; readers never take it.
//
// # Concurrency
//
// Every exported method is safe for concurrent use. Reads run under a shared lock and see only
// offsets below the HWM, whose bytes are immutable until retention deletes their segment;
// retention, segment rolls and Close take the exclusive lock, so no reader ever dereferences a
// removed file. Records returned by Read and ReadRange alias the log's decode cache: callers
// MUST NOT modify their Key or Payload (copy first if they need to).
//
// # Files and descriptors
//
// An open log keeps one descriptor per segment for its lifetime (opened by recovery); idle
// eviction of whole logs bounds the total. Sealed-segment indexes are built lazily and at
// most two are kept at once.
package log
