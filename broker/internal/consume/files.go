package consume

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
)

// File names inside a partition directory (docs/internals/storage-format.md §14).
const (
	JournalFile    = "consumer.journal"
	CheckpointFile = "consumer.offset"
)

// Sizes of the fixed parts of the consumer files.
const (
	journalRecordSize  = 16 // frontier(8) seq(4) crc(4)
	checkpointHeader   = 20 // magic(4) crc(4) frontier(8) n(4)
	legacyCheckpointSz = 8  // v1: bare frontier
)

var checkpointMagic = [4]byte{'N', 'C', 'O', '1'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadCheckpoint is returned by DecodeCheckpoint for bytes that are not a valid consumer.offset.
var ErrBadCheckpoint = errors.New("malformed consumer checkpoint")

// JournalRecord is one consumer.journal entry (docs/internals/storage-format.md §14.1).
type JournalRecord struct {
	Frontier int64  // last offset such that every offset ≤ it is resolved; -1 = none
	Seq      uint32 // increments per record, never reset (detects a stale tail)
}

// AppendJournalRecord appends r's 16-byte encoding (big endian, CRC-32C over [0,12)) to dst.
func AppendJournalRecord(dst []byte, r JournalRecord) []byte {
	var b [journalRecordSize]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(r.Frontier))
	binary.BigEndian.PutUint32(b[8:12], r.Seq)
	binary.BigEndian.PutUint32(b[12:16], crc32.Checksum(b[:12], castagnoli))
	return append(dst, b[:]...)
}

// DecodeJournal returns the last valid record of a consumer.journal image and whether there
// was one. A torn tail (a partial last record) and records with a bad CRC are ignored; a
// record whose sequence does not move forward from the previous valid one marks a stale tail
// left by a lost truncation, and scanning stops there. Never fails: the journal only seeds
// recovery, and max(checkpoint, journal) keeps the result safe.
func DecodeJournal(b []byte) (JournalRecord, bool) {
	r, ok, _ := decodeJournal(b)
	return r, ok
}

// decodeJournal is DecodeJournal that also returns where the usable prefix ends: just past
// the last accepted record, or, if there is none, 0. Appends must start there, or a stale
// tail would hide them.
func decodeJournal(b []byte) (last JournalRecord, found bool, end int) {
	for pos := 0; pos+journalRecordSize <= len(b); pos += journalRecordSize {
		rec := b[pos : pos+journalRecordSize]
		if binary.BigEndian.Uint32(rec[12:16]) != crc32.Checksum(rec[:12], castagnoli) {
			continue
		}
		r := JournalRecord{
			Frontier: int64(binary.BigEndian.Uint64(rec[0:8])),
			Seq:      binary.BigEndian.Uint32(rec[8:12]),
		}
		if r.Frontier < -1 {
			continue
		}
		if found && int32(r.Seq-last.Seq) <= 0 {
			break
		}
		last, found, end = r, true, pos+journalRecordSize
	}
	return last, found, end
}

// Checkpoint is the content of consumer.offset (docs/internals/storage-format.md §14.2).
// Invariant: AckedAhead is strictly ascending and every entry is > Frontier.
type Checkpoint struct {
	Frontier   int64
	AckedAhead []int64
}

// EncodeCheckpoint returns c's NCO1 encoding. It panics if c breaks its invariant: the shard
// only ever hands it a sorted window above the frontier.
func EncodeCheckpoint(c Checkpoint) []byte {
	b := make([]byte, checkpointHeader+8*len(c.AckedAhead))
	copy(b[0:4], checkpointMagic[:])
	binary.BigEndian.PutUint64(b[8:16], uint64(c.Frontier))
	binary.BigEndian.PutUint32(b[16:20], uint32(len(c.AckedAhead)))
	prev := c.Frontier
	for i, o := range c.AckedAhead {
		if o <= prev {
			panic(fmt.Sprintf("consume: checkpoint acked-ahead not ascending above frontier %d: %d after %d", c.Frontier, o, prev))
		}
		binary.BigEndian.PutUint64(b[checkpointHeader+8*i:], uint64(o))
		prev = o
	}
	binary.BigEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], castagnoli))
	return b
}

// DecodeCheckpoint parses consumer.offset. An 8-byte file is the v1 legacy format (the
// frontier alone, big endian). Anything else must be a complete NCO1 record with a matching
// CRC, exact length, frontier ≥ -1 and a strictly ascending acked-ahead list above it.
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	if len(b) == legacyCheckpointSz {
		f := int64(binary.BigEndian.Uint64(b))
		if f < -1 {
			return Checkpoint{}, fmt.Errorf("%w: legacy frontier %d", ErrBadCheckpoint, f)
		}
		return Checkpoint{Frontier: f}, nil
	}
	if len(b) < checkpointHeader {
		return Checkpoint{}, fmt.Errorf("%w: %d bytes", ErrBadCheckpoint, len(b))
	}
	if [4]byte(b[0:4]) != checkpointMagic {
		return Checkpoint{}, fmt.Errorf("%w: bad magic", ErrBadCheckpoint)
	}
	if binary.BigEndian.Uint32(b[4:8]) != crc32.Checksum(b[8:], castagnoli) {
		return Checkpoint{}, fmt.Errorf("%w: crc mismatch", ErrBadCheckpoint)
	}
	c := Checkpoint{Frontier: int64(binary.BigEndian.Uint64(b[8:16]))}
	n := binary.BigEndian.Uint32(b[16:20])
	if uint64(len(b)-checkpointHeader) != 8*uint64(n) {
		return Checkpoint{}, fmt.Errorf("%w: count %d does not match length %d", ErrBadCheckpoint, n, len(b))
	}
	if c.Frontier < -1 {
		return Checkpoint{}, fmt.Errorf("%w: frontier %d", ErrBadCheckpoint, c.Frontier)
	}
	if n > 0 {
		c.AckedAhead = make([]int64, n)
	}
	prev := c.Frontier
	for i := range c.AckedAhead {
		o := int64(binary.BigEndian.Uint64(b[checkpointHeader+8*i:]))
		if o <= prev {
			return Checkpoint{}, fmt.Errorf("%w: acked-ahead %d not above %d", ErrBadCheckpoint, o, prev)
		}
		c.AckedAhead[i] = o
		prev = o
	}
	return c, nil
}

// recovered is what a partition's consumer files say (docs/internals/storage-format.md §14.3).
type recovered struct {
	Checkpoint        // frontier = max(checkpoint, journal); acked-ahead above it only
	lastSeq    uint32 // last valid journal sequence; the next record uses lastSeq+1
	journalEnd int64  // end of the journal's usable prefix; anything after it is cut
}

// readConsumerFiles recovers the frontier from dir. Missing files (or a missing dir) mean
// frontier -1. A corrupt checkpoint is logged and ignored (the journal still counts): the
// files only seed recovery, and a lower frontier costs duplicates, never loss. Read errors
// other than "does not exist" are returned.
func readConsumerFiles(dir string, logger *slog.Logger) (recovered, error) {
	rec := recovered{Checkpoint: Checkpoint{Frontier: -1}}
	var ckpt Checkpoint
	ckpt.Frontier = -1
	b, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	switch {
	case err == nil:
		c, derr := DecodeCheckpoint(b)
		if derr != nil {
			logger.Error("consumer checkpoint unreadable; recovering from the journal alone",
				"file", filepath.Join(dir, CheckpointFile), "err", derr)
		} else {
			ckpt = c
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return rec, fmt.Errorf("read %s: %w", CheckpointFile, err)
	}
	jb, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rec, fmt.Errorf("read %s: %w", JournalFile, err)
	}
	jr, ok, end := decodeJournal(jb)
	rec.journalEnd = int64(end)
	rec.Frontier = ckpt.Frontier
	if ok {
		rec.lastSeq = jr.Seq
		rec.Frontier = max(rec.Frontier, jr.Frontier)
	}
	for _, o := range ckpt.AckedAhead {
		if o > rec.Frontier {
			rec.AckedAhead = append(rec.AckedAhead, o)
		}
	}
	return rec, nil
}

// StoreReplicatedCheckpoint writes b, a replicated partition leader's consumer state as
// EncodeCheckpoint made it, as dir's consumer.offset (docs/internals/replication.md §8): the
// follower that holds dir never has a shard open on it, and the copy seeds the shard it opens
// if it becomes the leader, so a failover redelivers at most what was acked since the last
// copy. b must decode (DecodeCheckpoint); the write is atomic and durable.
func StoreReplicatedCheckpoint(dir string, b []byte) error {
	if _, err := DecodeCheckpoint(b); err != nil {
		return err
	}
	return durable.WriteFileAtomic(filepath.Join(dir, CheckpointFile), b)
}
