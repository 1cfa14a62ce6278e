// Package durable holds the crash-safe file primitives of docs/internals/storage-format.md §1: atomic
// replace (temp + fsync + rename + dir fsync), directory creation with parent fsyncs, and
// fdatasync. Every file that must survive a crash is written through one of these. direct.go
// opens files for direct I/O and makes the aligned buffers it needs; writebehind.go streams a
// large file's write-back to the disk while it is being written (§21).
package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrDirMissing is returned when a write targets a directory that no longer exists: a deleted
// topic's partition directory is never resurrected by a late writer (docs/internals/storage-format.md §13, §14.2).
var ErrDirMissing = errors.New("partition directory missing")

// TempSuffix marks temp files; every scanner ignores names containing it and Open removes them.
const TempSuffix = ".tmp-"

// IsTemp reports whether name is a temp file left by an interrupted atomic write.
func IsTemp(name string) bool { return strings.Contains(name, TempSuffix) }

// Fdatasync flushes f's data (and the metadata needed to read it back) to stable storage.
func Fdatasync(f *os.File) error {
	return unix.Fdatasync(int(f.Fd()))
}

// SyncDir fsyncs directory dir so that entries created, renamed or removed in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and any missing parents, fsyncing the parent of every level it created.
func MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return SyncDir(parent)
}

// WriteFileAtomic replaces path with data: write name.tmp-<random>, fsync, rename, fsync dir.
// If the directory does not exist it returns ErrDirMissing and creates nothing.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", dir, ErrDirMissing)
		}
		return err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path + TempSuffix + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", dir, ErrDirMissing)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

// RemoveTemps deletes leftover temp files in dir (non-recursive).
func RemoveTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if IsTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
