package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// LogStore is the Raft log and stable store on one pebble DB (docs/internals/metastore.md §3).
//
// Keys: 'L' + u64 BE index → encoded raft.Log; 'S' + key → stable value. Every write is
// committed with pebble.Sync before it returns: the Raft log is the durability root of the
// whole metastore (the FSM writes without sync and relies on replay from here).
// It implements raft.LogStore and raft.StableStore and is safe for concurrent use.
type LogStore struct {
	db *pebble.DB
}

var (
	_ raft.LogStore    = (*LogStore)(nil)
	_ raft.StableStore = (*LogStore)(nil)
)

const (
	logKeyPrefix    = 'L'
	stableKeyPrefix = 'S'
	// logEntryHeader is index u64 · term u64 · type u8 · appended_at_ns i64 · len u32.
	logEntryHeader = 8 + 8 + 1 + 8 + 4
)

var (
	logKeyLower = []byte{logKeyPrefix}
	logKeyUpper = []byte{logKeyPrefix + 1}
	// errCorruptLog reports an undecodable stored log entry.
	errCorruptLog = errors.New("meta: corrupt raft log entry")
)

// OpenLogStore opens (creating if needed) the pebble DB at dir.
func OpenLogStore(dir string, logger *slog.Logger) (*LogStore, error) {
	return openLogStore(dir, nil, logger)
}

func openLogStore(dir string, fs vfs.FS, logger *slog.Logger) (*LogStore, error) {
	db, err := pebble.Open(dir, pebbleOptions(fs, logger))
	if err != nil {
		return nil, fmt.Errorf("meta: open raft log store %s: %w", dir, err)
	}
	return &LogStore{db: db}, nil
}

// Close closes the DB.
func (s *LogStore) Close() error { return s.db.Close() }

func logKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{logKeyPrefix}, index)
}

func stableKey(k []byte) []byte { return append([]byte{stableKeyPrefix}, k...) }

// FirstIndex returns the first stored index, 0 when the log is empty.
func (s *LogStore) FirstIndex() (uint64, error) { return s.edgeIndex(true) }

// LastIndex returns the last stored index, 0 when the log is empty.
func (s *LogStore) LastIndex() (uint64, error) { return s.edgeIndex(false) }

func (s *LogStore) edgeIndex(first bool) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKeyLower, UpperBound: logKeyUpper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var ok bool
	if first {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	if !ok {
		return 0, it.Error()
	}
	k := it.Key()
	if len(k) != 9 {
		return 0, fmt.Errorf("%w: key length %d", errCorruptLog, len(k))
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// GetLog reads the entry at index into out; raft.ErrLogNotFound when absent.
func (s *LogStore) GetLog(index uint64, out *raft.Log) error {
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	return decodeLogEntry(v, out)
}

// StoreLog stores one entry (synced).
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one synced batch: all or none survive a crash.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, l := range logs {
		if err := b.Set(logKey(l.Index), encodeLogEntry(l), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// DeleteRange deletes entries min..max inclusive (synced).
func (s *LogStore) DeleteRange(min, max uint64) error {
	end := logKeyUpper
	if max < ^uint64(0) {
		end = logKey(max + 1)
	}
	return s.db.DeleteRange(logKey(min), end, pebble.Sync)
}

// Set stores a stable value (synced).
func (s *LogStore) Set(key, val []byte) error { return s.db.Set(stableKey(key), val, pebble.Sync) }

// Get returns a stable value, or an empty slice when the key is absent.
func (s *LogStore) Get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// SetUint64 stores val as 8 bytes BE (synced).
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value stored by SetUint64, or 0 when the key is absent.
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("meta: stable key %q: %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// encodeLogEntry: index u64 · term u64 · type u8 · appended_at_ns i64 · len u32 · data ·
// len u32 · extensions (all BE). A zero AppendedAt is stored as 0.
func encodeLogEntry(l *raft.Log) []byte {
	b := make([]byte, 0, logEntryHeader+len(l.Data)+4+len(l.Extensions))
	b = binary.BigEndian.AppendUint64(b, l.Index)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Extensions)))
	b = append(b, l.Extensions...)
	return b
}

// decodeLogEntry is the inverse of encodeLogEntry; it copies data out of b.
func decodeLogEntry(b []byte, out *raft.Log) error {
	if len(b) < logEntryHeader {
		return fmt.Errorf("%w: %d bytes", errCorruptLog, len(b))
	}
	out.Index = binary.BigEndian.Uint64(b[0:])
	out.Term = binary.BigEndian.Uint64(b[8:])
	out.Type = raft.LogType(b[16])
	at := int64(binary.BigEndian.Uint64(b[17:]))
	out.AppendedAt = time.Time{}
	if at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	rest := b[25:]
	data, rest, ok := cutLenPrefixed(rest)
	if !ok {
		return fmt.Errorf("%w: data length", errCorruptLog)
	}
	ext, rest, ok := cutLenPrefixed(rest)
	if !ok || len(rest) != 0 {
		return fmt.Errorf("%w: extensions length", errCorruptLog)
	}
	out.Data = cloneOrNil(data)
	out.Extensions = cloneOrNil(ext)
	return nil
}

// cutLenPrefixed splits a u32-BE-length-prefixed field off b.
func cutLenPrefixed(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n], b[n:], true
}

func cloneOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
