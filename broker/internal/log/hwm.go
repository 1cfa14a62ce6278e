package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/durable"
)

// HWMFileName is the name of the durable high-watermark file in a partition directory.
const HWMFileName = "hwm"

// hwm file layout (docs/internals/storage-format.md §7.2): hwm int64 BE | flags uint32 BE (bit 0 CLEAN) |
// CRC-32C over [0,12). 16 bytes sit in one sector, so the in-place pwrite is atomic on real
// devices; the CRC catches the rest. A legacy v1 file is a bare 8-byte value.
const (
	hwmFileSize   = 16
	hwmLegacySize = 8
	hwmFlagClean  = 1
)

// hwmState is a decoded hwm file.
type hwmState struct {
	hwm     int64
	clean   bool // CLEAN flag: written only by Close; exact for a closed log
	present bool // false: missing or empty file ("no HWM file")
	legacy  bool // 8-byte v1 value (CLEAN=0)
}

// encodeHWM returns the 16-byte hwm record.
func encodeHWM(hwm int64, clean bool) [hwmFileSize]byte {
	var b [hwmFileSize]byte
	binary.BigEndian.PutUint64(b[0:], uint64(hwm))
	var flags uint32
	if clean {
		flags |= hwmFlagClean
	}
	binary.BigEndian.PutUint32(b[8:], flags)
	binary.BigEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

// decodeHWM decodes the content of an hwm file: empty → not present; 8 bytes → legacy;
// 16 bytes with a valid CRC and a non-negative value → current; anything else ErrCorruptHWM.
// Flag bits other than CLEAN are ignored.
func decodeHWM(b []byte) (hwmState, error) {
	switch len(b) {
	case 0:
		return hwmState{}, nil
	case hwmLegacySize:
		v := int64(binary.BigEndian.Uint64(b))
		if v < 0 {
			return hwmState{}, fmt.Errorf("legacy value %d: %w", v, ErrCorruptHWM)
		}
		return hwmState{hwm: v, present: true, legacy: true}, nil
	case hwmFileSize:
		if crc32.Checksum(b[:12], castagnoli) != binary.BigEndian.Uint32(b[12:]) {
			return hwmState{}, fmt.Errorf("crc mismatch: %w", ErrCorruptHWM)
		}
		v := int64(binary.BigEndian.Uint64(b))
		if v < 0 {
			return hwmState{}, fmt.Errorf("value %d: %w", v, ErrCorruptHWM)
		}
		flags := binary.BigEndian.Uint32(b[8:])
		return hwmState{hwm: v, clean: flags&hwmFlagClean != 0, present: true}, nil
	}
	return hwmState{}, fmt.Errorf("size %d: %w", len(b), ErrCorruptHWM)
}

// readHWMFile reads and decodes dir's hwm file without creating it. A missing file is "not
// present"; an oversized one is corrupt (never read whole).
func readHWMFile(dir string) (hwmState, error) {
	f, err := os.Open(filepath.Join(dir, HWMFileName))
	if errors.Is(err, os.ErrNotExist) {
		return hwmState{}, nil
	}
	if err != nil {
		return hwmState{}, err
	}
	defer f.Close()
	return readHWMFrom(f)
}

func readHWMFrom(f *os.File) (hwmState, error) {
	fi, err := f.Stat()
	if err != nil {
		return hwmState{}, err
	}
	if fi.Size() > hwmFileSize {
		return hwmState{}, fmt.Errorf("size %d: %w", fi.Size(), ErrCorruptHWM)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return hwmState{}, err
	}
	return decodeHWM(b)
}

// hwmFile is the open hwm file of a log. Used only by the write-lock holder.
type hwmFile struct {
	f   *os.File
	dir string
	// needDirSync is true while the file's creation has not been made durable by an fsync of
	// the partition directory (once per log lifetime, docs/internals/storage-format.md §7.2).
	needDirSync bool
	// syncs counts the fdatasyncs of the file (tests read it).
	syncs int
}

// openHWMFile opens (creating if needed) dir's hwm file and returns its current content.
func openHWMFile(dir string) (*hwmFile, hwmState, error) {
	path := filepath.Join(dir, HWMFileName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, hwmState{}, fmt.Errorf("log: open %s: %w", path, err)
	}
	st, err := readHWMFrom(f)
	if err != nil {
		f.Close()
		return nil, hwmState{}, fmt.Errorf("log: %s: %w", path, err)
	}
	return &hwmFile{f: f, dir: dir, needDirSync: errors.Is(statErr, os.ErrNotExist)}, st, nil
}

// persist overwrites the file in place with (hwm, clean) and makes it durable: pwrite at 0,
// fdatasync, and on first creation an fsync of the directory.
func (h *hwmFile) persist(hwm int64, clean bool) error {
	b := encodeHWM(hwm, clean)
	if _, err := h.f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("write hwm: %w", err)
	}
	if err := durable.Fdatasync(h.f); err != nil {
		return fmt.Errorf("fdatasync hwm: %w", err)
	}
	h.syncs++
	if h.needDirSync {
		if err := durable.SyncDir(h.dir); err != nil {
			return err
		}
		h.needDirSync = false
	}
	return nil
}

func (h *hwmFile) close() error { return h.f.Close() }

// write overwrites the file in place with (hwm, not clean) without an fdatasync: the value
// survives a process crash (the page cache holds it), while a power loss may leave an older
// one, which only a replicated log's HWM may do (docs/internals/storage-format.md §20). Until
// the file's creation is durable it persists instead.
func (h *hwmFile) write(hwm int64) error {
	if h.needDirSync {
		return h.persist(hwm, false)
	}
	b := encodeHWM(hwm, false)
	if _, err := h.f.WriteAt(b[:], 0); err != nil {
		return fmt.Errorf("write hwm: %w", err)
	}
	return nil
}
