package cursorsync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"narad.dev/broker/internal/fanout/cursorfile"
)

// Version is the envelope version Encode writes and Decode accepts.
const Version = 1

// MaxCursors bounds the cursors of one snapshot: above meta.MaxChildren links per parent, with
// room for cursor files of links being dissolved.
const MaxCursors = 256

// ErrMalformed reports an envelope Decode refuses.
var ErrMalformed = errors.New("cursorsync: malformed cursor envelope")

// Cursor is one link's position: the next parent offset to fan out to Child, under the
// link's attach Epoch.
type Cursor struct {
	Child      string
	Epoch      string
	NextOffset int64
}

// Encode returns the version 1 envelope of cs, which must be sorted by Child, duplicate-free,
// at most MaxCursors, and each recordable in a cursor file.
func Encode(cs []Cursor) ([]byte, error) {
	if len(cs) > MaxCursors {
		return nil, fmt.Errorf("cursorsync: %d cursors, at most %d", len(cs), MaxCursors)
	}
	b := []byte{Version}
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for i, c := range cs {
		if err := check(cs, i); err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(c.Child)))
		b = append(b, c.Child...)
		b = binary.AppendUvarint(b, uint64(len(c.Epoch)))
		b = append(b, c.Epoch...)
		b = binary.AppendUvarint(b, uint64(c.NextOffset))
	}
	return b, nil
}

// check validates cs[i] and its order after cs[i-1].
func check(cs []Cursor, i int) error {
	c := cs[i]
	if i > 0 && cs[i-1].Child >= c.Child {
		return fmt.Errorf("cursorsync: child %.40q out of order", c.Child)
	}
	if _, err := cursorfile.Encode(c.Child, c.Epoch, c.NextOffset); err != nil {
		return fmt.Errorf("cursorsync: cursor %d: %w", i, err)
	}
	return nil
}

// Decode parses a version 1 envelope. Every refusal is ErrMalformed.
func Decode(b []byte) ([]Cursor, error) {
	if len(b) == 0 || b[0] != Version {
		return nil, fmt.Errorf("%w: not version %d", ErrMalformed, Version)
	}
	d := decoder{b: b[1:]}
	n := d.uvarint()
	if d.err != nil || n > MaxCursors {
		return nil, fmt.Errorf("%w: bad cursor count", ErrMalformed)
	}
	cs := make([]Cursor, 0, n)
	for i := range int(n) {
		c := Cursor{Child: d.str(cursorfile.MaxChildLen), Epoch: d.str(cursorfile.MaxEpochLen)}
		next := d.uvarint()
		if d.err != nil || next > math.MaxInt64 {
			return nil, fmt.Errorf("%w: cursor %d truncated or out of range", ErrMalformed, i)
		}
		c.NextOffset = int64(next)
		cs = append(cs, c)
		if err := check(cs, i); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last cursor", ErrMalformed, len(d.b))
	}
	return cs, nil
}

// decoder reads the envelope's fields; the first failure sticks in err.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("short or overlong field")

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) { // overlong: one encoding per value
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

// str reads a length-prefixed string of at most maxLen bytes.
func (d *decoder) str(maxLen int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(maxLen) || n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
