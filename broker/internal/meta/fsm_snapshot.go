package meta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/faults"
)

// ErrCorruptSnapshot reports a snapshot stream that fails its CRC-32C trailer or framing.
var ErrCorruptSnapshot = errors.New("meta: corrupt fsm snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// restoreBatchBytes bounds one pebble batch while loading a snapshot.
const restoreBatchBytes = 4 << 20

// Snapshot makes every applied entry durable (a synced write of m/applied: Raft compacts its
// log up to the snapshot index, so state at or below it must not live only in pebble's
// unsynced tail), then captures a consistent pebble snapshot. Called on the FSM goroutine.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	rec := appliedRecord{Index: f.appliedIndex.Load(), Term: f.appliedTerm.Load()}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := f.db.Set(keyApplied, raw, pebble.Sync); err != nil {
		return nil, fmt.Errorf("meta: sync m/applied for snapshot: %w", err)
	}
	return &fsmSnapshot{snap: f.db.NewSnapshot()}, nil
}

// fsmSnapshot streams one pebble snapshot; Persist may run concurrently with Apply.
type fsmSnapshot struct {
	snap *pebble.Snapshot
}

// Persist writes [len u32][key][len u32][value]… for every key, then the CRC-32C (Castagnoli,
// BE) of all preceding bytes.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	err := faults.Check("meta.snapshot.persist")
	if err == nil {
		err = writeSnapshotStream(sink, s.snap)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("meta: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release frees the pebble snapshot.
func (s *fsmSnapshot) Release() { _ = s.snap.Close() }

func writeSnapshotStream(w io.Writer, r pebble.Reader) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	h := crc32.New(castagnoli)
	mw := io.MultiWriter(bw, h)
	it, err := r.NewIter(nil)
	if err != nil {
		return err
	}
	var lenBuf [4]byte
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		for _, field := range [][]byte{it.Key(), it.Value()} {
			binary.BigEndian.PutUint32(lenBuf[:], uint32(len(field)))
			if _, err = mw.Write(lenBuf[:]); err != nil {
				break
			}
			if _, err = mw.Write(field); err != nil {
				break
			}
		}
	}
	if ierr := it.Error(); err == nil {
		err = ierr
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(lenBuf[:], h.Sum32())
	if _, err := bw.Write(lenBuf[:]); err != nil {
		return err
	}
	return bw.Flush()
}

// snapshotRecord is one key/value of a decoded stream (slices of the stream buffer).
type snapshotRecord struct{ key, value []byte }

// decodeSnapshot verifies the trailer and splits the stream into records. It never panics;
// every failure wraps ErrCorruptSnapshot.
func decodeSnapshot(data []byte) ([]snapshotRecord, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no trailer", ErrCorruptSnapshot, len(data))
	}
	body, trailer := data[:len(data)-4], data[len(data)-4:]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(trailer); got != want {
		return nil, fmt.Errorf("%w: crc %08x, trailer says %08x", ErrCorruptSnapshot, got, want)
	}
	var recs []snapshotRecord
	for len(body) > 0 {
		k, rest, ok := cutLenPrefixed(body)
		if !ok || len(k) == 0 {
			return nil, fmt.Errorf("%w: bad key at record %d", ErrCorruptSnapshot, len(recs))
		}
		v, rest, ok := cutLenPrefixed(rest)
		if !ok {
			return nil, fmt.Errorf("%w: bad value at record %d", ErrCorruptSnapshot, len(recs))
		}
		recs = append(recs, snapshotRecord{key: k, value: v})
		body = rest
	}
	return recs, nil
}

// Restore replaces the whole state with the snapshot stream (raft calls it on the FSM
// goroutine, e.g. when installing a leader's snapshot). The stream is verified in full
// before anything is deleted, so a corrupt snapshot leaves the state untouched.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.restore(rc, 0); err != nil {
		return err
	}
	if f.onApply != nil {
		f.onApply(Event{Op: OpRestore, Partition: -1})
	}
	return nil
}

// restore loads a snapshot stream (no event: Restore reports it, the start-up check runs
// before anyone listens). m/applied becomes max(the stream's m/applied, minApplied):
// the start-up check passes the snapshot's Raft index as minApplied (entries between the two
// are no-op/configuration entries that never reach the FSM).
func (f *fsm) restore(r io.Reader, minApplied uint64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("meta: read snapshot: %w", err)
	}
	recs, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	var applied appliedRecord
	for _, rec := range recs {
		if bytes.Equal(rec.key, keyApplied) {
			if err := json.Unmarshal(rec.value, &applied); err != nil {
				return fmt.Errorf("%w: m/applied: %v", ErrCorruptSnapshot, err)
			}
		}
	}
	if applied.Index < minApplied {
		applied = appliedRecord{Index: minApplied, Term: applied.Term}
	}
	if err := faults.Check("meta.fsm.before_restore"); err != nil {
		return fmt.Errorf("meta: restore: %w", err)
	}

	f.restoreMu.Lock()
	defer f.restoreMu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if err := f.load(recs, applied); err != nil {
		// The DB holds a partial state without m/applied: the next start restores again.
		panic(fmt.Sprintf("meta: fsm restore failed mid-way: %v", err))
	}
	f.appliedIndex.Store(applied.Index)
	f.appliedTerm.Store(applied.Term)
	if applied.Index > f.lastSeen.Load() {
		f.lastSeen.Store(applied.Index)
	}
	n, err := countPrefix(f.db, []byte(prefixTopic))
	if err != nil {
		return err
	}
	f.topicCount.Store(int64(n))
	f.versions.bumpAll()
	f.applies.notify()
	return nil
}

// load wipes every key, writes recs in bounded NoSync batches and finally m/applied with Sync.
// m/applied is deleted by the first batch and written by the last, so a crash in between
// leaves an FSM that is behind the latest snapshot (restored again at start).
func (f *fsm) load(recs []snapshotRecord, applied appliedRecord) error {
	b := f.db.NewBatch()
	if last, ok, err := lastKey(f.db); err != nil {
		return err
	} else if ok {
		// Keys are never empty, so [0x00, last+0x00) covers them all.
		if err := b.DeleteRange([]byte{0}, append(last, 0), nil); err != nil {
			return err
		}
	}
	for _, rec := range recs {
		if bytes.Equal(rec.key, keyApplied) {
			continue
		}
		if err := b.Set(rec.key, rec.value, nil); err != nil {
			return err
		}
		if b.Len() >= restoreBatchBytes {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			b.Close()
			b = f.db.NewBatch()
		}
	}
	raw, err := json.Marshal(applied)
	if err != nil {
		return err
	}
	if err := b.Set(keyApplied, raw, nil); err != nil {
		return err
	}
	defer b.Close()
	return b.Commit(pebble.Sync)
}

func lastKey(db *pebble.DB) ([]byte, bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	if !it.Last() {
		return nil, false, it.Error()
	}
	return append([]byte(nil), it.Key()...), true, nil
}
