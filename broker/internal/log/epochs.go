package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"narad.dev/broker/internal/durable"
)

// The leader-epoch file of a replicated partition (docs/internals/storage-format.md §19,
// docs/internals/replication.md §7): for every leader epoch this replica has written records
// under, the offset of the first of them. It is what a replica that follows a new leader uses
// to find where its log and the leader's diverge, and it is rewritten (atomically, fsynced)
// on every change, before the records of a new epoch are appended.
//
//	offset 0   magic "NLEP"
//	4          version (1)
//	5          3 zero bytes
//	8          count, uint32 big endian (≤ MaxEpochEntries)
//	12         count × {epoch uint64, start offset int64}, big endian
//	12+16n     CRC-32C (Castagnoli) of every byte before it, uint32 big endian
//
// Entries are in strictly increasing epoch order with non-decreasing, non-negative start
// offsets; anything else is corrupt.

// EpochFileName is the leader-epoch file's name inside a partition directory.
const EpochFileName = "leader-epochs"

// MaxEpochEntries bounds the entries a leader-epoch file may hold; retention drops the oldest
// (TruncateBefore) long before a partition sees this many leader changes.
const MaxEpochEntries = 4096

const (
	epochMagic      = "NLEP"
	epochVersion    = 1
	epochHeaderLen  = 12
	epochEntryLen   = 16
	epochTrailerLen = 4
)

// ErrEpochFileCorrupt reports a leader-epoch file that fails its checks.
var ErrEpochFileCorrupt = errors.New("log: leader-epoch file corrupt")

// ErrEpochOrder reports an epoch assignment that would move backwards (an older epoch, or a
// start offset before the latest entry's).
var ErrEpochOrder = errors.New("log: leader epoch out of order")

// EpochEntry says that records from Start on were written under leader epoch Epoch.
type EpochEntry struct {
	Epoch uint64
	Start int64
}

// EncodeEpochs returns the file bytes of entries (which must be valid: see DecodeEpochs).
func EncodeEpochs(entries []EpochEntry) []byte {
	b := make([]byte, epochHeaderLen, epochHeaderLen+epochEntryLen*len(entries)+epochTrailerLen)
	copy(b, epochMagic)
	b[4] = epochVersion
	binary.BigEndian.PutUint32(b[8:], uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, e.Epoch)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Start))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeEpochs parses a leader-epoch file. Every failure wraps ErrEpochFileCorrupt.
func DecodeEpochs(b []byte) ([]EpochEntry, error) {
	corrupt := func(why string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrEpochFileCorrupt, fmt.Sprintf(why, args...))
	}
	if len(b) < epochHeaderLen+epochTrailerLen {
		return nil, corrupt("%d bytes", len(b))
	}
	if string(b[:4]) != epochMagic || b[4] != epochVersion || b[5]|b[6]|b[7] != 0 {
		return nil, corrupt("bad header")
	}
	n := binary.BigEndian.Uint32(b[8:])
	if n > MaxEpochEntries || len(b) != epochHeaderLen+int(n)*epochEntryLen+epochTrailerLen {
		return nil, corrupt("%d entries in %d bytes", n, len(b))
	}
	body := len(b) - epochTrailerLen
	if crc32.Checksum(b[:body], castagnoli) != binary.BigEndian.Uint32(b[body:]) {
		return nil, corrupt("checksum mismatch")
	}
	entries := make([]EpochEntry, n)
	for i := range entries {
		at := epochHeaderLen + i*epochEntryLen
		e := EpochEntry{Epoch: binary.BigEndian.Uint64(b[at:]), Start: int64(binary.BigEndian.Uint64(b[at+8:]))}
		if e.Start < 0 {
			return nil, corrupt("entry %d: negative start %d", i, e.Start)
		}
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.Start < entries[i-1].Start) {
			return nil, corrupt("entry %d (epoch %d at %d) out of order", i, e.Epoch, e.Start)
		}
		entries[i] = e
	}
	return entries, nil
}

// Epochs is the leader-epoch file of one partition directory, cached in memory. Every change
// is on disk (atomically replaced and fsynced) before it returns. Safe for concurrent use.
type Epochs struct {
	path string

	mu      sync.Mutex
	entries []EpochEntry
}

// OpenEpochs reads dir's leader-epoch file; a missing file is an empty history.
func OpenEpochs(dir string) (*Epochs, error) {
	path := filepath.Join(dir, EpochFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Epochs{path: path}, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := DecodeEpochs(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Epochs{path: path, entries: entries}, nil
}

// Entries returns a copy of the history, oldest first.
func (e *Epochs) Entries() []EpochEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.entries)
}

// Latest returns the newest entry; ok is false for an empty history.
func (e *Epochs) Latest() (_ EpochEntry, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.entries) == 0 {
		return EpochEntry{}, false
	}
	return e.entries[len(e.entries)-1], true
}

// Assign records that records from start on are written under epoch. Assigning the latest
// epoch again is a no-op; an older epoch, or a start before the latest entry's, is
// ErrEpochOrder. A full history drops its oldest entry.
func (e *Epochs) Assign(epoch uint64, start int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if start < 0 {
		return fmt.Errorf("%w: negative start %d", ErrEpochOrder, start)
	}
	if n := len(e.entries); n > 0 {
		last := e.entries[n-1]
		if epoch == last.Epoch {
			return nil
		}
		if epoch < last.Epoch || start < last.Start {
			return fmt.Errorf("%w: epoch %d at %d after epoch %d at %d", ErrEpochOrder, epoch, start, last.Epoch, last.Start)
		}
	}
	next := append(slices.Clone(e.entries), EpochEntry{Epoch: epoch, Start: start})
	if len(next) > MaxEpochEntries {
		next = next[len(next)-MaxEpochEntries:]
	}
	return e.store(next)
}

// EndOffsetFor answers a follower of a new leader (docs/internals/replication.md §7): the
// largest epoch this replica knows that is ≤ epoch, and the offset where it ends: the start
// of the next epoch, or leo (this log's end offset) when it is the latest. ok is false when
// every known epoch is newer than epoch (or none is known): the asker must truncate to its
// own log start.
func (e *Epochs) EndOffsetFor(epoch uint64, leo int64) (found uint64, end int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i, exact := slices.BinarySearchFunc(e.entries, epoch, func(x EpochEntry, t uint64) int {
		switch {
		case x.Epoch < t:
			return -1
		case x.Epoch > t:
			return 1
		}
		return 0
	})
	if !exact {
		i-- // the largest entry below epoch
	}
	if i < 0 {
		return 0, 0, false
	}
	if i == len(e.entries)-1 {
		return e.entries[i].Epoch, leo, true
	}
	return e.entries[i].Epoch, e.entries[i+1].Start, true
}

// TruncateFrom forgets every epoch that starts at or after end: the log was truncated to
// end, so nothing of them remains.
func (e *Epochs) TruncateFrom(end int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := len(e.entries)
	for i > 0 && e.entries[i-1].Start >= end {
		i--
	}
	if i == len(e.entries) {
		return nil
	}
	return e.store(slices.Clone(e.entries[:i]))
}

// TruncateBefore forgets the epochs that end at or before oldest (retention removed their
// records); the epoch holding oldest is kept with its start raised to oldest.
func (e *Epochs) TruncateBefore(oldest int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := 0
	for i+1 < len(e.entries) && e.entries[i+1].Start <= oldest {
		i++
	}
	if i == 0 && (len(e.entries) == 0 || e.entries[0].Start >= oldest) {
		return nil
	}
	next := slices.Clone(e.entries[i:])
	next[0].Start = max(next[0].Start, oldest)
	return e.store(next)
}

// store writes next to disk and, once it is there, caches it. Caller holds mu.
func (e *Epochs) store(next []EpochEntry) error {
	if err := durable.WriteFileAtomic(e.path, EncodeEpochs(next)); err != nil {
		return fmt.Errorf("log: write %s: %w", e.path, err)
	}
	e.entries = next
	return nil
}
