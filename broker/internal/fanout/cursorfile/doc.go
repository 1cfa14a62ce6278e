// Package cursorfile reads and writes a fan-out cursor file: the durable position of one
// cursor, one file per (parent partition, child), kept next to the parent partition's log
// (docs/operating.md, "Data directory").
//
// # Names
//
// The file of child is <partition dir>/fanout-<h>.cursor, h being 32 lowercase hex digits of
// the child name's SHA-256 (Path). The name never depends on what the child is called beyond
// the hash, so no legal topic name or remote link id can make it longer than a file name may be
// or match the temp-file pattern that a log open deletes (durable.IsTemp); the record names
// the child. Releases before record version 2 named the file fanout-<child>.offset: Open
// migrates such a file (rewrite under the new name durably, then remove the old one) and List
// still reports it.
//
// # Format
//
// The current (version 2) record is exactly RecordSize (512) bytes:
//
//	{"crc":"HHHHHHHH","v":2,"child":"<child>","epoch":"<epoch>","next_offset":<n>}<spaces…>\n
//
// Key order is fixed and there is no whitespace inside the JSON object. crc is 8 lowercase,
// zero-padded hex digits of a CRC-32C (Castagnoli) over every byte after the crc value's closing
// quote: bytes [17, 512) of the file — the rest of the JSON, the padding spaces and the final
// newline. child is the child topic name or remote link id and epoch the link's attach epoch
// (16 lowercase hex chars normally); both accept any ASCII graphic characters other than '"'
// and '\\'. next_offset is the next parent offset to fan out, a canonical decimal int64 ≥ 0.
// Spaces pad the JSON up to byte 510; byte 511 is '\n'.
//
// A record whose JSON does not fit in 511 bytes (a child and epoch longer than ~410 characters
// together) is written in the long form: the same JSON followed by one '\n', no padding, with
// the CRC over bytes [17, EOF). Older records are read: version 1 (v3.1.0), the same layout
// without "v" and "child" in 256 bytes (or its long form), and version 0, the variable-length
// {"epoch":"…","next_offset":N} without a crc. The next write makes any of them version 2.
//
// # Writes
//
// A running cursor keeps its file open in a Writer and advances it in place: one 512-byte
// pwrite at offset 0 and one fdatasync. The first anchor, the replacement of an older-version
// or long-form file and every write of a long-form record go through a temp file, rename and
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
