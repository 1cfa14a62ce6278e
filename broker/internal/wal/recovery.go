package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"narad.dev/broker/internal/durable"
)

// Open opens (creating if needed) the WAL in dir and recovers it (docs/internals/storage-format.md §12.4):
// every segment is scanned; corruption that runs to EOF in the last segment is a torn tail and
// is truncated; corruption followed by a later valid frame, corruption in an earlier segment,
// a seq gap between segments, or a checkpoint outside the recovered range fails the open with
// ErrDamaged naming the segment. Segments wholly below the checkpoint are deleted.
func Open(dir string, opts Options) (*WAL, error) {
	opts = opts.withDefaults()
	if err := durable.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	w, err := recoverWAL(dir, opts, lock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	go w.syncLoop()
	if err := w.compact(); err != nil {
		w.log.Warn("wal: compaction at open", "err", err)
	}
	return w, nil
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	return f, nil
}

func recoverWAL(dir string, opts Options, lock *os.File) (*WAL, error) {
	if err := durable.RemoveTemps(dir); err != nil {
		return nil, fmt.Errorf("wal: remove temps: %w", err)
	}
	cpf, cp, cpErr := openCheckpointFile(dir)
	if cpf == nil {
		return nil, cpErr
	}
	w, err := recoverFrom(dir, opts, lock, cpf, cp, cpErr)
	if err != nil {
		cpf.f.Close()
		return nil, err
	}
	return w, nil
}

// recoverFrom is recoverWAL past the checkpoint file's open. A checkpoint that does not decode
// (cpErr, a write torn by a crash or a damaged disk) is replaced by the first segment's base,
// which the true checkpoint cannot be below (compaction deletes only segments wholly below a
// durable checkpoint): the records in between are dispatched again (duplicates, never losses).
// Without a segment there is nothing to tell the next seq by, and the open fails.
func recoverFrom(dir string, opts Options, lock *os.File, cpf *checkpointFile, cp uint64, cpErr error) (*WAL, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	if err := recoverSegments(segs, opts); err != nil {
		return nil, err
	}
	if cpErr != nil {
		if len(segs) == 0 {
			return nil, fmt.Errorf("%w: %s: %w", ErrDamaged, checkpointName, cpErr)
		}
		cp = segs[0].base
		opts.Logger.Warn("wal: checkpoint unreadable; dispatching again from the first segment (duplicates possible)",
			"dir", dir, "checkpoint", cp, "err", cpErr)
	}
	next := cp
	if len(segs) > 0 {
		if segs[0].base > cp {
			return nil, fmt.Errorf("%w: checkpoint %d is below the first segment %s (segments missing)",
				ErrDamaged, cp, filepath.Base(segs[0].path))
		}
		next = segs[len(segs)-1].next
	}
	if cp > next {
		return nil, fmt.Errorf("%w: checkpoint %d is past the recovered next seq %d (segments missing)",
			ErrDamaged, cp, next)
	}

	w := &WAL{
		dir: dir, opts: opts, log: opts.Logger, lock: lock, cpf: cpf,
		nextSeq: next, durableNext: next, checkpoint: cp, segs: segs,
		tail:    tail{limit: opts.TailBytes},
		appendC: make(chan struct{}),
		kick:    make(chan struct{}, 1), quit: make(chan struct{}), loopDone: make(chan struct{}),
	}
	w.stage = w.newStage()
	if len(segs) > 0 {
		last := segs[len(segs)-1]
		f, err := os.OpenFile(last.path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, fmt.Errorf("wal: open %s: %w", last.path, err)
		}
		w.active, w.activeSeg = f, last
	}
	w.log.Info("wal: opened", "dir", dir, "segments", len(segs), "checkpoint", cp, "next_seq", next)
	return w, nil
}

// recoverSegments scans every segment, fills in next/size/index, and truncates a torn tail of
// the last one.
func recoverSegments(segs []*segment, opts Options) error {
	var buf []byte
	for i, seg := range segs {
		name := filepath.Base(seg.path)
		if i > 0 && seg.base != segs[i-1].next {
			return fmt.Errorf("%w: segment %s starts at seq %d but %s ends before seq %d",
				ErrDamaged, name, seg.base, filepath.Base(segs[i-1].path), segs[i-1].next)
		}
		data, err := readWhole(seg.path, buf)
		if err != nil {
			return fmt.Errorf("wal: read %s: %w", name, err)
		}
		buf = data[:0]
		res := scanSegment(data, seg.base, opts.MaxRecordBytes)
		seg.next, seg.size, seg.index = res.next, res.validTo, res.index
		if res.damage == nil {
			continue
		}
		last := i == len(segs)-1
		switch {
		case !last:
			return fmt.Errorf("%w: segment %s (not the last segment): %w", ErrDamaged, name, res.damage)
		case res.laterValid:
			return fmt.Errorf("%w: segment %s: %w, and valid frames follow", ErrDamaged, name, res.damage)
		}
		opts.Logger.Warn("wal: truncating torn tail", "segment", name, "offset", res.validTo,
			"dropped_bytes", int64(len(data))-res.validTo, "next_seq", res.next, "cause", res.damage)
		if err := truncateFile(seg.path, res.validTo); err != nil {
			return fmt.Errorf("wal: truncate %s: %w", name, err)
		}
	}
	return nil
}

// readWhole reads the file at path into buf (grown as needed).
func readWhole(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := int(fi.Size())
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return durable.Fdatasync(f)
}
