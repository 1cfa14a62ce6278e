package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record formats (docs/internals/storage-format.md §12.2). Format 2 adds the topic incarnation; format 1
// (v1, no incarnation) still decodes with Incarnation "" (unknown).
const (
	recordFormat1 = 1
	recordFormat2 = 2
)

// ErrCorruptRecord is returned by DecodeRecord for bytes that are not exactly one well-formed
// record: unknown format, truncation, or trailing bytes.
var ErrCorruptRecord = errors.New("wal: corrupt record")

// Record is one accepted produce as stored in the ingress WAL.
type Record struct {
	Topic string
	// Incarnation is the topic incarnation stamped at accept; "" means unknown (format 1).
	Incarnation string
	// Key is the message key; "" means keyless.
	Key string
	// Partition is the target partition resolved at accept time.
	Partition uint32
	// AcceptedAtMs is the accepting node's wall clock at accept, unix milliseconds.
	AcceptedAtMs int64
	// Payload is the message body. Records returned by the WAL share memory with it: callers
	// must treat Payload as read-only.
	Payload []byte
}

// EncodedLen is the size of r's format-2 encoding.
func EncodedLen(r Record) int {
	return 1 + 4 + len(r.Topic) + 4 + len(r.Incarnation) + 4 + len(r.Key) + 4 + 8 + 4 + len(r.Payload)
}

// EncodeRecord returns r in record format 2.
func EncodeRecord(r Record) []byte {
	return AppendRecord(make([]byte, 0, EncodedLen(r)), r)
}

// AppendRecord appends r's format-2 encoding to dst and returns the extended slice.
func AppendRecord(dst []byte, r Record) []byte {
	dst = append(dst, recordFormat2)
	dst = appendString(dst, r.Topic)
	dst = appendString(dst, r.Incarnation)
	dst = appendString(dst, r.Key)
	dst = binary.BigEndian.AppendUint32(dst, r.Partition)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.AcceptedAtMs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Payload)))
	return append(dst, r.Payload...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// DecodeRecord decodes one record of format 1 or 2. The returned Payload aliases b; the
// strings are copies. Any unknown format, truncation or trailing byte is ErrCorruptRecord, so a
// damaged frame never decodes as a plausible record.
func DecodeRecord(b []byte) (Record, error) {
	raw, err := decodeRecordFields(b)
	if err != nil {
		return Record{}, err
	}
	return Record{
		Topic: string(raw.topic), Incarnation: string(raw.incarnation), Key: string(raw.key),
		Partition: raw.partition, AcceptedAtMs: raw.acceptedAtMs, Payload: raw.payload,
	}, nil
}

// rawRecord is a decoded record whose fields alias the encoded bytes.
type rawRecord struct {
	topic, incarnation, key []byte
	partition               uint32
	acceptedAtMs            int64
	payload                 []byte
}

func decodeRecordFields(b []byte) (rawRecord, error) {
	var r rawRecord
	if len(b) == 0 {
		return r, fmt.Errorf("%w: empty", ErrCorruptRecord)
	}
	format := b[0]
	if format != recordFormat1 && format != recordFormat2 {
		return r, fmt.Errorf("%w: unknown format %d", ErrCorruptRecord, format)
	}
	d := decoder{b: b[1:]}
	r.topic = d.bytes()
	if format == recordFormat2 {
		r.incarnation = d.bytes()
	}
	r.key = d.bytes()
	r.partition = d.u32()
	r.acceptedAtMs = int64(d.u64())
	r.payload = d.bytes()
	if d.bad {
		return rawRecord{}, fmt.Errorf("%w: truncated", ErrCorruptRecord)
	}
	if len(d.b) != 0 {
		return rawRecord{}, fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecord, len(d.b))
	}
	return r, nil
}

// decoder reads big-endian fields; once a read runs past the end it sets bad and returns zeros.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) u32() uint32 {
	if d.bad || len(d.b) < 4 {
		d.bad = true
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if d.bad || len(d.b) < 8 {
		d.bad = true
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.u32()
	if d.bad || uint64(len(d.b)) < uint64(n) {
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
