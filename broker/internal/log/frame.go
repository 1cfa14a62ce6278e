package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Frame layout (docs/internals/storage-format.md §3), all integers big-endian:
//
//	0 magic 0xCAFE | 2 flags (bits 0–2 codec) | 3 record_count int32 | 7 base_offset int64 |
//	15 uncompressed_len int32 | 19 stored_len int32 | 23 crc32c | 27 payload (stored_len)
//
// The CRC covers bytes [2,23) of the header plus the stored payload; it excludes the magic so
// the recovery scanner can search for 0xCAFE cheaply, and covers the compressed bytes so
// durability verification never decompresses.
const (
	frameHeaderSize = 27
	frameMagic0     = 0xCA
	frameMagic1     = 0xFE
	// maxFrameBytes bounds uncompressed_len and stored_len on read and write, so a damaged
	// header cannot force a huge allocation.
	maxFrameBytes = 256 << 20
	// maxInnerBytes is the writer's split point: no frame's inner payload exceeds it.
	maxInnerBytes = maxFrameBytes / 2
	codecMask     = 0x07
	// recordPrefix is the per-record length prefix inside a frame payload.
	recordPrefix = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header-level failures; all are "mid-file corruption" to recovery and ErrCorruptRecord to
// readers.
var (
	errBadMagic  = errors.New("bad frame magic")
	errBadHeader = errors.New("frame header out of range")
	errBadCRC    = errors.New("frame crc mismatch")
	errShort     = errors.New("frame extends past end of file")
)

// frameHeader is a parsed frame header. A header that parsed is in range; its CRC is not
// checked until the payload is read.
type frameHeader struct {
	codec Codec
	count int32
	base  int64
	ulen  int32
	slen  int32
	crc   uint32
}

// size is the frame's byte length on disk.
func (h frameHeader) size() int64 { return frameHeaderSize + int64(h.slen) }

// end is the offset after the frame's last record.
func (h frameHeader) end() int64 { return h.base + int64(h.count) }

// parseFrameHeader parses and range-checks the 27-byte header at the start of b.
func parseFrameHeader(b []byte) (frameHeader, error) {
	if len(b) < frameHeaderSize {
		return frameHeader{}, errShort
	}
	if b[0] != frameMagic0 || b[1] != frameMagic1 {
		return frameHeader{}, errBadMagic
	}
	h := frameHeader{
		codec: Codec(b[2] & codecMask),
		count: int32(binary.BigEndian.Uint32(b[3:])),
		base:  int64(binary.BigEndian.Uint64(b[7:])),
		ulen:  int32(binary.BigEndian.Uint32(b[15:])),
		slen:  int32(binary.BigEndian.Uint32(b[19:])),
		crc:   binary.BigEndian.Uint32(b[23:]),
	}
	switch {
	case h.count <= 0, h.base < 0, h.base > (1<<63-1)-int64(h.count),
		h.ulen <= 0, h.ulen > maxFrameBytes, h.slen <= 0, h.slen > maxFrameBytes,
		int64(h.count)*recordPrefix > int64(h.ulen),
		h.codec == CodecNone && h.slen != h.ulen:
		return frameHeader{}, errBadHeader
	}
	return h, nil
}

// putFrameHeader writes h (without the CRC) into b[:frameHeaderSize].
func putFrameHeader(b []byte, h frameHeader) {
	b[0], b[1] = frameMagic0, frameMagic1
	b[2] = byte(h.codec) & codecMask
	binary.BigEndian.PutUint32(b[3:], uint32(h.count))
	binary.BigEndian.PutUint64(b[7:], uint64(h.base))
	binary.BigEndian.PutUint32(b[15:], uint32(h.ulen))
	binary.BigEndian.PutUint32(b[19:], uint32(h.slen))
}

// frameCRC computes the frame checksum over header bytes [2,23) and the stored payload.
func frameCRC(frame []byte) uint32 {
	c := crc32.Update(0, castagnoli, frame[2:23])
	return crc32.Update(c, castagnoli, frame[frameHeaderSize:])
}

// sealFrame stores the CRC of the complete frame b (header already written).
func sealFrame(b []byte) {
	binary.BigEndian.PutUint32(b[23:], frameCRC(b))
}

// checkFrame parses the header at the start of b and checks the CRC over raw bytes without
// decoding. It returns errShort when b is shorter than the frame the header announces.
func checkFrame(b []byte) (frameHeader, error) {
	h, err := parseFrameHeader(b)
	if err != nil {
		return h, err
	}
	if int64(len(b)) < h.size() {
		return h, errShort
	}
	if frameCRC(b[:h.size()]) != h.crc {
		return h, errBadCRC
	}
	return h, nil
}

// decodeFrame decodes a whole frame (header + payload, CRC checked) into records whose Key
// and Payload alias the frame's decoded bytes. size is the decoded bytes retained.
func decodeFrame(b []byte) (recs []Record, size int, err error) {
	h, err := checkFrame(b)
	if err != nil {
		return nil, 0, fmt.Errorf("frame: %w: %w", err, ErrCorruptRecord)
	}
	inner := b[frameHeaderSize:h.size()]
	size = len(b)
	switch h.codec {
	case CodecNone:
	case CodecZstd:
		inner, err = zstdDecode(inner, int(h.ulen))
		if err != nil {
			return nil, 0, fmt.Errorf("frame at offset %d: %w: %w", h.base, err, ErrCorruptRecord)
		}
		size = len(inner)
	default:
		return nil, 0, fmt.Errorf("frame at offset %d: unknown codec %d: %w", h.base, h.codec, ErrCorruptRecord)
	}
	if len(inner) != int(h.ulen) {
		return nil, 0, fmt.Errorf("frame at offset %d: decoded %d bytes, header says %d: %w",
			h.base, len(inner), h.ulen, ErrCorruptRecord)
	}
	recs, err = splitRecords(inner, h)
	return recs, size, err
}

// splitRecords splits an inner payload into exactly h.count envelopes with no trailing bytes.
// It validates before allocating, so the allocation is bounded by the real payload.
func splitRecords(inner []byte, h frameHeader) ([]Record, error) {
	p := inner
	for i := int32(0); i < h.count; i++ {
		if len(p) < recordPrefix {
			return nil, fmt.Errorf("frame at offset %d: record %d truncated: %w", h.base, i, ErrCorruptRecord)
		}
		n := binary.BigEndian.Uint32(p)
		if uint64(n) > uint64(len(p)-recordPrefix) {
			return nil, fmt.Errorf("frame at offset %d: record %d overruns payload: %w", h.base, i, ErrCorruptRecord)
		}
		p = p[recordPrefix+int(n):]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("frame at offset %d: %d trailing bytes: %w", h.base, len(p), ErrCorruptRecord)
	}
	recs := make([]Record, h.count)
	p = inner
	for i := range recs {
		n := binary.BigEndian.Uint32(p)
		env := p[recordPrefix : recordPrefix+int(n) : recordPrefix+int(n)]
		p = p[recordPrefix+int(n):]
		key, ts, payload, err := DecodeEnvelope(env)
		if err != nil {
			return nil, fmt.Errorf("frame at offset %d: record %d: %w", h.base, i, err)
		}
		recs[i] = Record{Offset: h.base + int64(i), Key: key, CommittedAt: ts, Payload: payload}
	}
	return recs, nil
}
