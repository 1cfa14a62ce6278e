package cursorfile

import (
	"bytes"
	"crypto/sha256"
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

// RecordSize is the size in bytes of a current-format (version 2) cursor record.
const RecordSize = 512

// V1RecordSize is the size of a fixed version 1 (v3.1.0) record, which carries no child name.
const V1RecordSize = 256

// MaxEpochLen bounds an epoch's length in bytes. Real epochs are 16 hex chars; anything past
// the fixed record's room uses the long form, up to this cap.
const MaxEpochLen = 1024

// MaxChildLen bounds a child name recorded in a cursor file: a topic name (at most 255 bytes)
// or a remote link id (remote:<topic>@<host:port>). Longer names cannot be recorded.
const MaxChildLen = 1024

// maxFileSize bounds how much of a cursor file is read: a larger file is corrupt.
const maxFileSize = 4096

const (
	filePrefix   = "fanout-"
	fileSuffix   = ".cursor"
	legacySuffix = ".offset" // version 0 and 1 files: fanout-<child>.offset
	hashHexLen   = 32        // hex digits of the child-name hash in a file name

	crcPrefix   = `{"crc":"`         // bytes [0, 8)
	crcEnd      = len(crcPrefix) + 8 // 16: the crc value's closing quote
	crcCovered  = crcEnd + 1         // 17: first byte the CRC covers
	childKey    = `,"v":2,"child":"` // version 2: follows the crc value's closing quote
	epochKey    = `,"epoch":"`       // version 1: follows the crc value's closing quote
	epochKey2   = `","epoch":"`      // version 2: closes the child string
	offsetKey   = `","next_offset":` // closes the epoch string
	maxInt64Len = len("9223372036854775807")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrNotExist: there is no cursor file. It wraps fs.ErrNotExist.
	ErrNotExist = fmt.Errorf("cursor file missing: %w", fs.ErrNotExist)
	// ErrCorrupt: the file failed its check on every re-read; the caller takes the
	// corrupt-cursor path (docs/internals/fanout.md §5).
	ErrCorrupt = errors.New("cursor file corrupt")
	// ErrInvalid: a child, epoch or offset that cannot be recorded (empty or unsafe child or
	// epoch, a '/' in a child, longer than MaxChildLen or MaxEpochLen, negative offset).
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
	Child      string // child the position belongs to; "" in a version 0 or 1 record
	Epoch      string // attach epoch the position belongs to
	NextOffset int64  // next parent offset to fan out
	Version    int    // record version: 0 legacy JSON, 1 fixed 256 bytes, 2 current
}

// Path returns the cursor file of child in a parent partition directory: fanout-<h>.cursor,
// where h is the first 16 bytes of the SHA-256 of the child name in hex. The name has a fixed
// length and only hex digits, so no child name can make it too long for the file system or
// look like a temp file (durable.IsTemp), whatever the child is called.
func Path(partitionDir, child string) string {
	return filepath.Join(partitionDir, FileName(child))
}

// FileName returns the base name of child's cursor file.
func FileName(child string) string {
	sum := sha256.Sum256([]byte(child))
	return filePrefix + hex.EncodeToString(sum[:hashHexLen/2]) + fileSuffix
}

// legacyPath returns the file of child in the layout before record version 2,
// fanout-<child>.offset, and false when that name cannot exist (longer than a file name may
// be, or a path separator in the child).
func legacyPath(partitionDir, child string) (string, bool) {
	name := filePrefix + child + legacySuffix
	if child == "" || len(name) > 255 || strings.ContainsAny(child, "/\\\x00") {
		return "", false
	}
	return filepath.Join(partitionDir, name), true
}

// isCurrentName reports whether name is a version 2 cursor file name.
func isCurrentName(name string) bool {
	if len(name) != len(filePrefix)+hashHexLen+len(fileSuffix) ||
		!strings.HasPrefix(name, filePrefix) || !strings.HasSuffix(name, fileSuffix) {
		return false
	}
	return lowerHex([]byte(name[len(filePrefix) : len(filePrefix)+hashHexLen]))
}

// legacyChild returns the child named by a cursor file name of the layout before version 2,
// and false for any other name (temp files of interrupted atomic writes included).
func legacyChild(name string) (string, bool) {
	if durable.IsTemp(name) || !strings.HasPrefix(name, filePrefix) || !strings.HasSuffix(name, legacySuffix) {
		return "", false
	}
	child := name[len(filePrefix) : len(name)-len(legacySuffix)]
	return child, child != ""
}

// validValue reports whether v (a child or an epoch) can be written without JSON escaping, so
// that encoding and parsing are exact inverses.
func validValue(v string, maxLen int) bool {
	if v == "" || len(v) > maxLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !valueByte(v[i]) {
			return false
		}
	}
	return true
}

func validEpoch(epoch string) bool { return validValue(epoch, MaxEpochLen) }

// validChild also refuses a '/': no topic name or remote link id holds one.
func validChild(child string) bool {
	return validValue(child, MaxChildLen) && !strings.Contains(child, "/")
}

func valueByte(c byte) bool { return c > ' ' && c < 0x7f && c != '"' && c != '\\' }

// Encode returns the version 2 record for (child, epoch, next): the fixed RecordSize form when
// its JSON fits in RecordSize-1 bytes, the long form otherwise (see the package doc).
func Encode(child, epoch string, next int64) ([]byte, error) {
	b, _, err := encode(child, epoch, next)
	return b, err
}

// EncodeV1 returns the version 1 record for (epoch, next), without a child name. A transfer
// listing ships cursors in this form (it names the child beside the record), which every
// release reads; the destination writes them as version 2.
func EncodeV1(epoch string, next int64) ([]byte, error) {
	if !validEpoch(epoch) {
		return nil, fmt.Errorf("epoch %.40q: %w", epoch, ErrInvalid)
	}
	if next < 0 {
		return nil, fmt.Errorf("next_offset %d: %w", next, ErrInvalid)
	}
	b := make([]byte, 0, V1RecordSize)
	b = append(b, crcPrefix...)
	b = append(b, "00000000\""...)
	b = append(b, epochKey...)
	b = append(b, epoch...)
	b = append(b, offsetKey...)
	b = strconv.AppendInt(b, next, 10)
	b = append(b, '}')
	b, _ = finish(b, V1RecordSize)
	return b, nil
}

// encode also reports whether the record is the fixed form.
func encode(child, epoch string, next int64) ([]byte, bool, error) {
	if !validChild(child) {
		return nil, false, fmt.Errorf("child %.40q: %w", child, ErrInvalid)
	}
	if !validEpoch(epoch) {
		return nil, false, fmt.Errorf("epoch %.40q: %w", epoch, ErrInvalid)
	}
	if next < 0 {
		return nil, false, fmt.Errorf("next_offset %d: %w", next, ErrInvalid)
	}
	b := make([]byte, 0, RecordSize)
	b = append(b, crcPrefix...)
	b = append(b, "00000000\""...)
	b = append(b, childKey...)
	b = append(b, child...)
	b = append(b, epochKey2...)
	b = append(b, epoch...)
	b = append(b, offsetKey...)
	b = strconv.AppendInt(b, next, 10)
	b = append(b, '}')
	b, fixed := finish(b, RecordSize)
	return b, fixed, nil
}

// finish pads the JSON in b to size-1 bytes when it fits, appends the newline and fills in the
// CRC over every byte after the crc value.
func finish(b []byte, size int) ([]byte, bool) {
	fixed := len(b) <= size-1
	if fixed {
		for len(b) < size-1 {
			b = append(b, ' ')
		}
	}
	b = append(b, '\n')
	var sum [4]byte
	c := crc32.Checksum(b[crcCovered:], castagnoli)
	sum[0], sum[1], sum[2], sum[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	hex.Encode(b[len(crcPrefix):crcEnd], sum[:])
	return b, fixed
}

// Parse decodes a whole cursor file: a version 2 record (fixed RecordSize bytes or long form),
// a version 1 record (fixed V1RecordSize bytes or long form; no child) or the legacy version 0
// JSON (no crc). A record with a crc is checked over every byte after the crc value. Anything
// else, and any CRC mismatch, is ErrCorrupt. Parse never re-reads; see Read.
func Parse(b []byte) (State, error) {
	st, _, err := parse(b)
	return st, err
}

// parse also reports whether b was the fixed form of its version.
func parse(b []byte) (State, bool, error) {
	if !bytes.HasPrefix(b, []byte(crcPrefix)) {
		st, err := parseLegacy(b)
		return st, false, err
	}
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
	st := State{Version: 1}
	size := V1RecordSize
	var err error
	switch {
	case bytes.HasPrefix(rest, []byte(childKey)):
		st.Version, size = 2, RecordSize
		if st.Child, rest, err = quoted(rest[len(childKey):], "child", MaxChildLen); err != nil {
			return State{}, false, err
		}
		if !validChild(st.Child) {
			return State{}, false, corruptf("child %.40q", st.Child)
		}
		if !bytes.HasPrefix(rest, []byte(epochKey2)) {
			return State{}, false, corruptf("epoch key")
		}
		rest = rest[len(epochKey2):]
	case bytes.HasPrefix(rest, []byte(epochKey)):
		rest = rest[len(epochKey):]
	default:
		return State{}, false, corruptf("epoch key")
	}
	if st.Epoch, rest, err = quoted(rest, "epoch", MaxEpochLen); err != nil {
		return State{}, false, err
	}
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
	st.NextOffset = next
	rest = rest[n:]
	if len(rest) == 0 || rest[0] != '}' {
		return State{}, false, corruptf("unterminated object")
	}
	tail := rest[1:]
	fixed := len(b) == size
	if fixed {
		// Spaces up to the last byte, then exactly one '\n'.
		if len(tail) == 0 || tail[len(tail)-1] != '\n' || strings.Trim(string(tail[:len(tail)-1]), " ") != "" {
			return State{}, false, corruptf("padding")
		}
	} else if strings.TrimRight(string(tail), " \n") != "" {
		return State{}, false, corruptf("trailing bytes")
	}
	return st, fixed, nil
}

// quoted reads a string value up to its closing quote (not consumed) and checks it.
func quoted(b []byte, what string, maxLen int) (string, []byte, error) {
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return "", nil, corruptf("unterminated %s", what)
	}
	v := string(b[:end])
	if !validValue(v, maxLen) {
		return "", nil, corruptf("%s %.40q", what, v)
	}
	return v, b[end:], nil
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
	return State{Epoch: epoch, NextOffset: next}, nil
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

// ParseName classifies a file name of a partition directory: ok for a cursor file, current
// for the version 2 layout (the child is in the record), else the legacy layout with child
// taken from the name. Temp files of interrupted writes are not cursor files.
func ParseName(name string) (child string, current, ok bool) {
	if isCurrentName(name) {
		return "", true, true
	}
	child, ok = legacyChild(name)
	return child, false, ok
}
