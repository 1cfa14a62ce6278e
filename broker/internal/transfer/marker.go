package transfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"narad.dev/broker/internal/durable"
)

// MarkerFile is the move marker's name inside an installed partition directory.
const MarkerFile = "move.marker"

// maxMarkerSize bounds how much of a marker file is read: a larger file is corrupt.
const maxMarkerSize = 1 << 20

// ErrBadMarker reports an undecodable move marker.
var ErrBadMarker = errors.New("transfer: bad move marker")

// Link is one child link that existed when a copy was installed.
type Link struct {
	Child string `json:"child"`
	Epoch string `json:"epoch"`
}

// Marker is the content of move.marker (docs/internals/storage-format.md §16). It is written by a move
// install into the installed partition directory and survives every later move and restart.
type Marker struct {
	V             int    `json:"v"`
	Topic         string `json:"topic"`
	Partition     int    `json:"partition"`
	Incarnation   string `json:"incarnation"`
	From          string `json:"from"`
	To            string `json:"to"`
	HWM           int64  `json:"hwm"`
	Force         bool   `json:"force"`
	InstalledAtMs int64  `json:"installed_at_ms"`
	DurableAtMs   int64  `json:"durable_at_ms,omitempty"` // 0: an older destination's marker
	Links         []Link `json:"links"`
}

// The encoding is one JSON line whose first member is the CRC: `{"crc":"xxxxxxxx",…}` with
// CRC-32C (8 lowercase hex) over every byte after the value's closing quote to EOF, the
// cursor file's convention (docs/internals/storage-format.md §13, §16).
const (
	markerCRCPrefix  = `{"crc":"`
	markerCRCEnd     = len(markerCRCPrefix) + 8 // the closing quote
	markerCRCCovered = markerCRCEnd + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeMarker returns m's file content (V is forced to 1; a nil Links is written as []).
func EncodeMarker(m Marker) []byte {
	m.V = 1
	if m.Links == nil {
		m.Links = []Link{}
	}
	body, err := json.Marshal(m)
	if err != nil { // only plain fields: cannot fail
		panic(fmt.Sprintf("transfer: encode marker: %v", err))
	}
	// body is {"v":1,…}; the CRC covers ,"v":1,…}\n
	covered := make([]byte, 0, len(body)+1)
	covered = append(covered, ',')
	covered = append(covered, body[1:]...)
	covered = append(covered, '\n')
	out := make([]byte, 0, markerCRCCovered+len(covered))
	out = append(out, markerCRCPrefix...)
	out = fmt.Appendf(out, "%08x", crc32.Checksum(covered, castagnoli))
	out = append(out, '"')
	return append(out, covered...)
}

// DecodeMarker parses a marker file's content: the CRC must match and the fields must be
// well formed (version 1, a topic, a partition ≥ 0, source and destination, HWM ≥ 0).
func DecodeMarker(b []byte) (Marker, error) {
	if len(b) > maxMarkerSize {
		return Marker{}, fmt.Errorf("%w: %d bytes", ErrBadMarker, len(b))
	}
	if len(b) < markerCRCCovered+2 || !bytes.HasPrefix(b, []byte(markerCRCPrefix)) || b[markerCRCEnd] != '"' {
		return Marker{}, fmt.Errorf("%w: no crc", ErrBadMarker)
	}
	want, err := strconv.ParseUint(string(b[len(markerCRCPrefix):markerCRCEnd]), 16, 32)
	if err != nil || !lowerHex(b[len(markerCRCPrefix):markerCRCEnd]) {
		return Marker{}, fmt.Errorf("%w: crc not hex", ErrBadMarker)
	}
	if crc32.Checksum(b[markerCRCCovered:], castagnoli) != uint32(want) {
		return Marker{}, fmt.Errorf("%w: crc mismatch", ErrBadMarker)
	}
	if b[markerCRCCovered] != ',' {
		return Marker{}, fmt.Errorf("%w: crc is the only member", ErrBadMarker)
	}
	var raw struct {
		CRC string `json:"crc"`
		Marker
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Marker{}, fmt.Errorf("%w: %v", ErrBadMarker, err)
	}
	m := raw.Marker
	switch {
	case m.V != 1:
		return Marker{}, fmt.Errorf("%w: version %d", ErrBadMarker, m.V)
	case m.Topic == "" || m.Partition < 0 || m.From == "" || m.To == "" || m.HWM < 0:
		return Marker{}, fmt.Errorf("%w: missing or negative field", ErrBadMarker)
	}
	return m, nil
}

func lowerHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ReadMarker reads dir/move.marker: found=false when there is none.
func ReadMarker(dir string) (m Marker, found bool, err error) {
	b, err := ReadMarkerRaw(dir)
	if err != nil || b == nil {
		return Marker{}, false, err
	}
	m, err = DecodeMarker(b)
	if err != nil {
		return Marker{}, true, fmt.Errorf("%s: %w", filepath.Join(dir, MarkerFile), err)
	}
	return m, true, nil
}

// ReadMarkerRaw returns dir/move.marker's bytes, nil when there is none.
func ReadMarkerRaw(dir string) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, MarkerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkerSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMarkerSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadMarker, maxMarkerSize)
	}
	return b, nil
}

// WriteMarker replaces dir/move.marker atomically (temp, fsync, rename, dir fsync).
func WriteMarker(dir string, m Marker) error {
	return durable.WriteFileAtomic(filepath.Join(dir, MarkerFile), EncodeMarker(m))
}
