package log

import (
	"encoding/binary"
	"fmt"
)

// envelopeVersion is the keyed record envelope v2 (docs/internals/storage-format.md §4); v1 (0x01) and anything
// else decode as corrupt.
const envelopeVersion = 0x02

// minEnvelopeBytes is the smallest envelope: version, key_len 0, committed_at.
const minEnvelopeBytes = 1 + 1 + 8

// EnvelopeLen returns the encoded size of an envelope holding key and payload.
func EnvelopeLen(key, payload []byte) int {
	return 1 + uvarintLen(uint64(len(key))) + len(key) + 8 + len(payload)
}

// EncodeEnvelope appends the v2 envelope of one record to dst and returns the extended slice:
// version 0x02, uvarint key_len, key, committed_at (int64 BE Unix milliseconds), payload.
// An empty key encodes a keyless record.
func EncodeEnvelope(dst []byte, key []byte, committedAtMs int64, payload []byte) []byte {
	dst = append(dst, envelopeVersion)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(committedAtMs))
	return append(dst, payload...)
}

// DecodeEnvelope splits a v2 envelope. key and payload alias b; key is nil for a keyless
// record. A wrong version, a non-minimal or overlong key length, or a short buffer returns
// ErrCorruptRecord.
func DecodeEnvelope(b []byte) (key []byte, committedAtMs int64, payload []byte, err error) {
	if len(b) < minEnvelopeBytes || b[0] != envelopeVersion {
		return nil, 0, nil, fmt.Errorf("envelope: bad version or size %d: %w", len(b), ErrCorruptRecord)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || k != uvarintLen(n) {
		return nil, 0, nil, fmt.Errorf("envelope: bad key length: %w", ErrCorruptRecord)
	}
	rest := b[1+k:]
	if n > uint64(len(rest)) || uint64(len(rest))-n < 8 {
		return nil, 0, nil, fmt.Errorf("envelope: key length %d overruns record: %w", n, ErrCorruptRecord)
	}
	if n > 0 {
		key = rest[:n:n]
	}
	committedAtMs = int64(binary.BigEndian.Uint64(rest[n:]))
	payload = rest[n+8:]
	return key, committedAtMs, payload, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
