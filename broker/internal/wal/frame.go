package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Frame layout (docs/internals/storage-format.md §12.1):
//
//	0  4  magic "NWAL" (0x4E57414C)
//	4  4  payload length, uint32 BE, 1 … MaxRecordBytes
//	8  8  seq, uint64 BE
//	16 4  CRC-32 IEEE of the payload
//	20 n  payload (an encoded Record)
//
// The seq is not covered by the CRC; recovery checks it against the expected dense sequence.
const (
	frameMagic      = 0x4E57414C
	frameHeaderSize = 20
)

// DefaultMaxRecordBytes is the largest encoded record a frame may carry (16 MiB).
const DefaultMaxRecordBytes = 16 << 20

// ErrCorruptFrame is returned when bytes at a frame position are not one valid frame.
var ErrCorruptFrame = errors.New("wal: corrupt frame")

// errShortFrame marks a frame that runs past the end of the available bytes (a torn tail
// candidate rather than damage in the middle).
var errShortFrame = fmt.Errorf("%w: truncated", ErrCorruptFrame)

// frameLen is the on-disk size of a frame carrying an n-byte payload.
func frameLen(n int) int { return frameHeaderSize + n }

// appendFrameHeader reserves a frame header for a payload that the caller appends next; the
// length, seq and CRC are filled in by sealFrame once the payload is in place.
func appendFrameHeader(dst []byte) []byte {
	return append(dst, make([]byte, frameHeaderSize)...)
}

// sealFrame fills the header at frame[0:20] for the payload frame[20:].
func sealFrame(frame []byte, seq uint64) {
	payload := frame[frameHeaderSize:]
	binary.BigEndian.PutUint32(frame[0:4], frameMagic)
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(payload)))
	binary.BigEndian.PutUint64(frame[8:16], seq)
	binary.BigEndian.PutUint32(frame[16:20], crc32.ChecksumIEEE(payload))
}

// frameHeader is the decoded fixed part of a frame.
type frameHeader struct {
	length uint32
	seq    uint64
	crc    uint32
}

// parseFrameHeader validates the magic and the length range of the header at b[0:20].
func parseFrameHeader(b []byte, maxRecord int) (frameHeader, error) {
	if len(b) < frameHeaderSize {
		return frameHeader{}, errShortFrame
	}
	if binary.BigEndian.Uint32(b[0:4]) != frameMagic {
		return frameHeader{}, fmt.Errorf("%w: bad magic", ErrCorruptFrame)
	}
	h := frameHeader{
		length: binary.BigEndian.Uint32(b[4:8]),
		seq:    binary.BigEndian.Uint64(b[8:16]),
		crc:    binary.BigEndian.Uint32(b[16:20]),
	}
	if h.length == 0 || uint64(h.length) > uint64(maxRecord) {
		return frameHeader{}, fmt.Errorf("%w: payload length %d out of range", ErrCorruptFrame, h.length)
	}
	return h, nil
}

// decodeFrame validates the frame at the start of b (magic, length range, completeness, CRC)
// and returns its seq, its payload (aliasing b) and its total size. A frame that would run past
// len(b) returns an error wrapping errShortFrame.
func decodeFrame(b []byte, maxRecord int) (seq uint64, payload []byte, n int, err error) {
	h, err := parseFrameHeader(b, maxRecord)
	if err != nil {
		return 0, nil, 0, err
	}
	n = frameLen(int(h.length))
	if len(b) < n {
		return 0, nil, 0, errShortFrame
	}
	payload = b[frameHeaderSize:n:n]
	if crc32.ChecksumIEEE(payload) != h.crc {
		return 0, nil, 0, fmt.Errorf("%w: crc mismatch at seq %d", ErrCorruptFrame, h.seq)
	}
	return h.seq, payload, n, nil
}
