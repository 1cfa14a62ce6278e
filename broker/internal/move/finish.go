package move

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

// FaultVerify forces the staged copy's verification to fail (MV-15).
const FaultVerify = "move.verify"

// errUnverified: the staged copy does not recover to exactly the HWM.
var errUnverified = errors.New("staged copy does not verify")

// writePositions writes the staged copy's positions (docs/internals/moves.md §5.6): consumer.offset
// with the frontier clamped below hwm and acked-ahead offsets below hwm, the exact CLEAN hwm
// file, and the fan-out cursor sidecars last, each parsed again and lowered to hwm if past
// it. force marks a force-promote (the clamp is expected there and not warned about twice).
func (w *worker) writePositions(l transfer.Listing, hwm int64, force bool) error {
	dir := w.sess.dir
	if err := removeIfExists(filepath.Join(dir, consume.JournalFile)); err != nil {
		return err
	}
	cp := filepath.Join(dir, consume.CheckpointFile)
	if l.HasCommitted {
		frontier := max(l.CommittedOffset, -1)
		if frontier > hwm-1 {
			w.log.Warn("move: listed consumer frontier is past the high watermark; clamped",
				"committed_offset", l.CommittedOffset, "hwm", hwm, "force", force)
			frontier = hwm - 1
		}
		var acked []int64
		for _, o := range l.AckedAhead {
			if o > frontier && o < hwm {
				acked = append(acked, o)
			}
		}
		slices.Sort(acked)
		acked = slices.Compact(acked)
		if err := durable.WriteFileAtomic(cp, consume.EncodeCheckpoint(consume.Checkpoint{Frontier: frontier, AckedAhead: acked})); err != nil {
			return fmt.Errorf("write staged consumer.offset: %w", err)
		}
	} else if err := removeIfExists(cp); err != nil {
		return err
	}
	if err := plog.WriteHWMFile(dir, hwm, true); err != nil {
		return err
	}
	return w.writeCursors(l, hwm)
}

// writeCursors installs the listing's fan-out cursor files into the staged copy, each
// CRC-checked again and written as a current record naming its child (cursorfile.Path); a
// cursor past hwm is lowered to it without a log line. Staged cursor files the listing no
// longer carries are removed.
func (w *worker) writeCursors(l transfer.Listing, hwm int64) error {
	dir := w.sess.dir
	keep := map[string]bool{}
	for _, c := range l.Cursors {
		st, err := cursorfile.Parse(c.Record)
		if err == nil && st.Child != "" && st.Child != c.Child {
			err = fmt.Errorf("record names child %.40q", st.Child)
		}
		if err != nil {
			w.log.Warn("move: listed fan-out cursor does not verify; not installed", "child", c.Child, "err", err)
			continue
		}
		rec, err := cursorfile.Encode(c.Child, st.Epoch, min(st.NextOffset, hwm))
		if err != nil {
			w.log.Warn("move: listed fan-out cursor has an unusable child name; not installed", "child", c.Child, "err", err)
			continue
		}
		path := cursorfile.Path(dir, c.Child)
		if err := durable.WriteFileAtomic(path, rec); err != nil {
			return fmt.Errorf("write staged cursor %s: %w", c.Child, err)
		}
		keep[filepath.Base(path)] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list staging: %w", err)
	}
	for _, e := range ents {
		if _, _, ok := cursorfile.ParseName(e.Name()); ok && !keep[e.Name()] {
			if err := removeIfExists(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// verify opens the staged copy as a log (recovery) and requires it to end exactly at hwm:
// next_offset == hwm and recovered HWM == hwm (§5.4 rule 5). A copy that recovers past hwm
// (only from a source listing file sizes) is cut back to hwm's frame boundary and opened
// once more. Close leaves the hwm file CLEAN.
func (w *worker) verify(hwm int64) error {
	if err := faults.Check(FaultVerify); err != nil {
		return fmt.Errorf("%w: %w", errUnverified, err)
	}
	next, got, err := w.openStaged()
	if err != nil {
		return fmt.Errorf("%w: %w", errUnverified, err)
	}
	if next > hwm {
		cut, err := plog.CutTail(w.sess.dir, hwm)
		if err != nil {
			return fmt.Errorf("%w: %w", errUnverified, err)
		}
		w.log.Info("move: staged copy recovered past the high watermark; cut back", "next_offset", next, "hwm", hwm, "cut", cut)
		if next, got, err = w.openStaged(); err != nil {
			return fmt.Errorf("%w: %w", errUnverified, err)
		}
	}
	w.setCopyNext(next)
	if next != hwm || got != hwm {
		return fmt.Errorf("%w: recovered next_offset %d and hwm %d, want both %d", errUnverified, next, got, hwm)
	}
	return nil
}

// openStaged reads what the staged copy recovers to: its next offset and HWM. Only the active
// segment is read (plog.VerifyTail): sealed segments are byte copies the new owner recovers the
// way the source does, and reading them all would stretch the freeze by the partition's size.
func (w *worker) openStaged() (next, hwm int64, err error) {
	return plog.VerifyTail(w.sess.dir)
}

// verifyFailed handles a verify failure after a drain under a freeze that held (§5.5): the
// first throws the staged copy away for one more copy from scratch; the second blocks the
// worker for good, and the source is never frozen again by it.
func (w *worker) verifyFailed(err error) error {
	w.verifyFailures++
	if w.verifyFailures == 1 {
		w.log.Warn("move: staged copy cannot be verified; copying once more from scratch", "err", err)
		w.sess.waitSyncs()
		if rerr := os.RemoveAll(w.sess.dir); rerr != nil {
			return fmt.Errorf("discard staged copy: %w", rerr)
		}
		w.sess = newSession(w.staging)
		return fmt.Errorf("%w: %w", errAgain, err)
	}
	w.log.Error("move: staged copy cannot be verified; not freezing the source again", "err", err)
	w.setErr(err)
	w.markUnverifiable()
	return fmt.Errorf("%w: %w", errBlocked, err)
}

// stampAges gives each staged segment the age its source copy has (docs/internals/moves.md §6): mtime
// = received_at − (listed_at_ms − mtime_ms). A listing without the fields, or an mtime more
// than FutureMtimeSkew ahead of listed_at, leaves the write time.
func (w *worker) stampAges(l transfer.Listing) {
	if l.ListedAtMs == 0 || l.ReceivedAt.IsZero() {
		return
	}
	for _, s := range l.Segments {
		if s.MtimeMs == 0 || s.MtimeMs > l.ListedAtMs+w.cfg.FutureMtimeSkew.Milliseconds() {
			continue
		}
		mt := l.ReceivedAt.Add(-time.Duration(l.ListedAtMs-s.MtimeMs) * time.Millisecond)
		if err := os.Chtimes(w.sess.segPath(s.Base), mt, mt); err != nil {
			w.log.Warn("move: cannot stamp a staged segment's age", "base", s.Base, "err", err)
		}
	}
}

// seal makes the staged copy durable and writes its move marker (docs/internals/moves.md §5.7):
// every file is fsynced, then move.marker (durable_at_ms stamped) and the staging directory.
// It returns the marker's bytes as written. A file whose fsync failed, now or in the
// background, is deleted and the seal fails: a later fsync could succeed over pages the
// failed write-back dropped, so only a fresh copy is trusted (the next attempt makes it, and a
// force-promote finds the copy behind).
func (w *worker) seal(hwm int64, force bool) ([]byte, transfer.Marker, error) {
	dir := w.sess.dir
	if err := w.sess.settle(w.log); err != nil {
		return nil, transfer.Marker{}, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, transfer.Marker{}, fmt.Errorf("list staging: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || durable.IsTemp(e.Name()) || e.Name() == transfer.MarkerFile {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := syncStaged(path, false); err != nil {
			w.log.Warn("move: the fsync of a staged file failed in the seal; copying it again", "path", path, "err", err)
			if base, ok := plog.ParseSegmentFileName(e.Name()); ok {
				delete(w.sess.synced, base)
			}
			if rerr := removeIfExists(path); rerr != nil {
				w.log.Warn("move: cannot delete a staged file whose fsync failed", "path", path, "err", rerr)
			}
			return nil, transfer.Marker{}, fmt.Errorf("%w: %w", errSyncLost, err)
		}
	}
	if err := durable.SyncDir(dir); err != nil {
		return nil, transfer.Marker{}, err
	}
	now := w.cfg.Now().UnixMilli()
	m := transfer.Marker{
		Topic: w.topic, Partition: w.p, Incarnation: w.incarnation, From: w.source, To: w.self,
		HWM: hwm, Force: force, InstalledAtMs: now, DurableAtMs: now, Links: w.links(),
	}
	if err := transfer.WriteMarker(dir, m); err != nil {
		return nil, transfer.Marker{}, fmt.Errorf("write move marker: %w", err)
	}
	raw, err := transfer.ReadMarkerRaw(dir)
	if err != nil || raw == nil {
		return nil, transfer.Marker{}, fmt.Errorf("read back move marker: %v", err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return nil, transfer.Marker{}, err
	}
	return raw, m, nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
