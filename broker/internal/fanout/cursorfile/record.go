package cursorfile

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"narad.dev/broker/internal/durable"
)

// RecordSize is the size in bytes of a current-format cursor record.
const RecordSize = 256

// MaxEpochLen bounds an epoch's length in bytes. Real epochs are 16 hex chars; anything past
// the fixed record's room (~190 chars) uses the long form, up to this cap.
const MaxEpochLen = 1024

// maxFileSize bounds how much of a cursor file is read: a larger file is corrupt.
const maxFileSize = 4096

const (
	filePrefix = "fanout-"
	fileSuffix = ".offset"

	crcPrefix   = `{"crc":"`         // bytes [0, 8)
	crcEnd      = len(crcPrefix) + 8 // 16: the crc value's closing quote
	crcCovered  = crcEnd + 1         // 17: first byte the CRC covers
	epochKey    = `,"epoch":"`       // follows the crc value's closing quote
	offsetKey   = `","next_offset":` // closes the epoch string
	maxInt64Len = len("9223372036854775807")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrNotExist: there is no cursor file. It wraps fs.ErrNotExist.
	ErrNotExist = fmt.Errorf("cursor file missing: %w", fs.ErrNotExist)
	// ErrCorrupt: the file failed its check on every re-read; the caller takes the
	// corrupt-cursor path (spec/fanout.md R-START rule 1).
	ErrCorrupt = errors.New("cursor file corrupt")
	// ErrInvalid: an epoch or offset that cannot be recorded (empty or unsafe epoch, epoch
	// longer than MaxEpochLen, negative offset).
	ErrInvalid = errors.New("invalid cursor value")
	// ErrBackwards: Advance was asked to move the durable position backwards. Re-anchoring
	// is an explicit Anchor, never an Advance.
	ErrBackwards = errors.New("cursor would move backwards")
	// ErrDirMissing: the partition directory is gone (topic deleted); it is never recreated.
	ErrDirMissing = durable.ErrDirMissing
	// ErrClosed: the Writer was closed.
	ErrClosed = errors.New("cursor writer closed")
)

// State is the content of a cursor file. Whether Epoch matches the running link's epoch is the
// caller's decision (never resume another attachment's position).
type State struct {
	Epoch      string // attach epoch the position belongs to
	NextOffset int64  // next parent offset to fan out
	Legacy     bool   // read from the older variable-length format; the next write migrates it
}

// Path returns the cursor file of child in a parent partition directory.
func Path(partitionDir, child string) string {
	return filepath.Join(partitionDir, filePrefix+child+fileSuffix)
}

// ChildFromFileName returns the child named by a cursor file's base name, and false for any
// other name (temp files of interrupted atomic writes included). For the orphan sweep.
func ChildFromFileName(name string) (string, bool) {
	if durable.IsTemp(name) || !strings.HasPrefix(name, filePrefix) || !strings.HasSuffix(name, fileSuffix) {
		return "", false
	}
	child := name[len(filePrefix) : len(name)-len(fileSuffix)]
	return child, child != ""
}

// validEpoch reports whether epoch can be written without JSON escaping, so that encoding and
// parsing are exact inverses.
func validEpoch(epoch string) bool {
	if epoch == "" || len(epoch) > MaxEpochLen {
		return false
	}
	for i := 0; i < len(epoch); i++ {
		if !epochByte(epoch[i]) {
			return false
		}
	}
	return true
}

func epochByte(c byte) bool { return c > ' ' && c < 0x7f && c != '"' && c != '\\' }

// Encode returns the record for (epoch, next): the fixed RecordSize form when its JSON fits
// in RecordSize-1 bytes, the long form otherwise (see the package doc).
func Encode(epoch string, next int64) ([]byte, error) {
	b, _, err := encode(epoch, next)
	return b, err
}

// encode also reports whether the record is the fixed form.
func encode(epoch string, next int64) ([]byte, bool, error) {
	if !validEpoch(epoch) {
		return nil, false, fmt.Errorf("epoch %.40q: %w", epoch, ErrInvalid)
	}
	if next < 0 {
		return nil, false, fmt.Errorf("next_offset %d: %w", next, ErrInvalid)
	}
	b := make([]byte, 0, RecordSize)
	b = append(b, crcPrefix...)
	b = append(b, "00000000\""...)
	b = append(b, epochKey...)
	b = append(b, epoch...)
	b = append(b, offsetKey...)
	b = strconv.AppendInt(b, next, 10)
	b = append(b, '}')
	fixed := len(b) <= RecordSize-1
	if fixed {
		for len(b) < RecordSize-1 {
			b = append(b, ' ')
		}
	}
	b = append(b, '\n')
	var sum [4]byte
	c := crc32.Checksum(b[crcCovered:], castagnoli)
	sum[0], sum[1], sum[2], sum[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	hex.Encode(b[len(crcPrefix):crcEnd], sum[:])
	return b, fixed, nil
}

// Parse decodes a whole cursor file: the fixed form (exactly RecordSize bytes, CRC over
// [17, 256)), the long form (any other length starting with a crc field, CRC over [17, EOF))
// or the legacy form (no crc). Anything else, and any CRC mismatch, is ErrCorrupt. Parse never
// re-reads; see Read.
func Parse(b []byte) (State, error) {
	st, _, err := parse(b)
	return st, err
}

// parse also reports whether b was the fixed form.
func parse(b []byte) (State, bool, error) {
	if !bytes.HasPrefix(b, []byte(crcPrefix)) {
		st, err := parseLegacy(b)
		return st, false, err
	}
	fixed := len(b) == RecordSize
	if len(b) < crcCovered || b[crcEnd] != '"' {
		return State{}, false, corruptf("truncated crc field")
	}
	var want [4]byte
	hexCRC := b[len(crcPrefix):crcEnd]
	if !lowerHex(hexCRC) {
		return State{}, false, corruptf("crc %q not lowercase hex", hexCRC)
	}
	_, _ = hex.Decode(want[:], hexCRC)
	got := crc32.Checksum(b[crcCovered:], castagnoli)
	if got != uint32(want[0])<<24|uint32(want[1])<<16|uint32(want[2])<<8|uint32(want[3]) {
		return State{}, false, corruptf("crc mismatch")
	}
	rest := b[crcCovered:]
	if !bytes.HasPrefix(rest, []byte(epochKey)) {
		return State{}, false, corruptf("epoch key")
	}
	rest = rest[len(epochKey):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return State{}, false, corruptf("unterminated epoch")
	}
	epoch := string(rest[:end])
	if !validEpoch(epoch) {
		return State{}, false, corruptf("epoch %.40q", epoch)
	}
	rest = rest[end:]
	if !bytes.HasPrefix(rest, []byte(offsetKey)) {
		return State{}, false, corruptf("next_offset key")
	}
	rest = rest[len(offsetKey):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	next, ok := canonicalInt(rest[:n])
	if !ok {
		return State{}, false, corruptf("next_offset %.24q", rest[:n])
	}
	rest = rest[n:]
	if len(rest) == 0 || rest[0] != '}' {
		return State{}, false, corruptf("unterminated object")
	}
	tail := rest[1:]
	if fixed {
		// Spaces up to byte 254, then exactly one '\n'.
		if len(tail) == 0 || tail[len(tail)-1] != '\n' || strings.Trim(string(tail[:len(tail)-1]), " ") != "" {
			return State{}, false, corruptf("padding")
		}
	} else if strings.TrimRight(string(tail), " \n") != "" {
		return State{}, false, corruptf("trailing bytes")
	}
	return State{Epoch: epoch, NextOffset: next}, fixed, nil
}

// parseLegacy decodes the pre-v3.1.0 record {"epoch":"…","next_offset":N}. It is strict about
// the key set (exactly these two keys) so that a damaged current-format record is never read
// as a legacy one.
func parseLegacy(b []byte) (State, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return State{}, corruptf("legacy: %v", err)
	}
	rawEpoch, okE := m["epoch"]
	rawNext, okN := m["next_offset"]
	if len(m) != 2 || !okE || !okN {
		return State{}, corruptf("legacy: want exactly epoch and next_offset")
	}
	var epoch string
	if err := json.Unmarshal(rawEpoch, &epoch); err != nil {
		return State{}, corruptf("legacy epoch: %v", err)
	}
	next, ok := canonicalInt(rawNext)
	if !ok {
		return State{}, corruptf("legacy next_offset %.24q", rawNext)
	}
	return State{Epoch: epoch, NextOffset: next, Legacy: true}, nil
}

// canonicalInt parses a non-negative decimal int64 written without sign or leading zeros.
func canonicalInt(d []byte) (int64, bool) {
	if len(d) == 0 || len(d) > maxInt64Len || (d[0] == '0' && len(d) > 1) {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(d), 10, 64)
	return v, err == nil
}

func lowerHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}
