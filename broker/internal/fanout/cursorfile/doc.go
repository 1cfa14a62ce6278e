// Package cursorfile reads and writes a fan-out cursor file: the durable position of one
// cursor, one file per (parent partition, child), kept next to the parent partition's log as
// <partition dir>/fanout-<child>.offset (spec/storage.md §12, seed "Fan-out engine" §Cursor file).
//
// # Format
//
// The current (v3.1.0) record is exactly RecordSize (256) bytes:
//
//	{"crc":"HHHHHHHH","epoch":"<epoch>","next_offset":<n>}<spaces…>\n
//
// Key order is fixed and there is no whitespace inside the JSON object. crc is 8 lowercase,
// zero-padded hex digits of a CRC-32C (Castagnoli) over every byte after the crc value's closing
// quote: bytes [17, 256) of the file — the `,"epoch"…` text, the padding spaces and the final
// newline. epoch is the link's attach epoch (16 lowercase hex chars normally; any ASCII graphic
// characters other than '"' and '\' are accepted). next_offset is the next parent offset to fan
// out, a canonical decimal int64 ≥ 0. Spaces pad the JSON up to byte 254; byte 255 is '\n'.
//
// A record whose JSON does not fit in 255 bytes (an epoch of more than ~190 characters) is
// written in the long form: the same JSON followed by one '\n', no padding, with the CRC over
// bytes [17, EOF). The older variable-length format {"epoch":"…","next_offset":N} (no crc, any
// length, optional surrounding whitespace) is read and reported as State.Legacy; the next write
// migrates it to the current format.
//
// # Writes
//
// A running cursor keeps its file open in a Writer and advances it in place: one 256-byte
// pwrite at offset 0 and one fdatasync. The first anchor, the replacement of a legacy or
// long-form file and every write of a long-form record go through a temp file, rename and
// directory fsync instead (durable.WriteFileAtomic), so a crash leaves either the old or the
// new file whole. A missing partition directory is never recreated (ErrDirMissing).
//
// # Invariant
//
// A reader never sees a cursor value that was not written whole: a record that mixes bytes of
// two writes (a torn in-place write, or a read that caught the writer mid-write) fails the CRC,
// is re-read a few times and is then reported as ErrCorrupt, never as a position. That the
// durable next_offset only moves forward past records the child has committed is the caller's
// discipline (seed: commit before advance); Writer.Advance enforces the "only forward" half by
// refusing to move backwards (ErrBackwards).
package cursorfile
