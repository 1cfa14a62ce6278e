package wal

import (
	"errors"
	"testing"
)

func buildFrame(seq uint64, r Record) []byte {
	b := appendFrameHeader(nil)
	b = AppendRecord(b, r)
	sealFrame(b, seq)
	return b
}

func TestFrameDecodeRejectsDamage(t *testing.T) {
	good := buildFrame(42, testRecord(1))
	flip := func(i int) []byte {
		b := append([]byte{}, good...)
		b[i] ^= 0x01
		return b
	}
	cases := []struct {
		name  string
		b     []byte
		short bool
	}{
		{"bad magic", flip(0), false},
		{"payload bit flip", flip(len(good) - 1), false},
		{"crc bit flip", flip(17), false},
		{"zero length", append(append([]byte{}, good[:4]...), make([]byte, 16)...), false},
		{"header cut", good[:10], true},
		{"payload cut", good[:len(good)-1], true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := decodeFrame(tc.b, DefaultMaxRecordBytes)
			if !errors.Is(err, ErrCorruptFrame) {
				t.Fatalf("decodeFrame = %v, want ErrCorruptFrame", err)
			}
			if got := errors.Is(err, errShortFrame); got != tc.short {
				t.Fatalf("short = %v, want %v (%v)", got, tc.short, err)
			}
		})
	}
	seq, payload, n, err := decodeFrame(good, DefaultMaxRecordBytes)
	if err != nil || seq != 42 || n != len(good) || string(payload) != string(EncodeRecord(testRecord(1))) {
		t.Fatalf("good frame: seq %d n %d err %v", seq, n, err)
	}
}

func TestFrameLengthAboveMaxRecordIsCorrupt(t *testing.T) {
	f := buildFrame(1, Record{Topic: "t", Payload: make([]byte, 100)})
	if _, _, _, err := decodeFrame(f, 50); !errors.Is(err, ErrCorruptFrame) || errors.Is(err, errShortFrame) {
		t.Fatalf("decodeFrame with max 50 = %v, want non-short ErrCorruptFrame", err)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(buildFrame(0, testRecord(0)))
	f.Add(buildFrame(1<<40, Record{Topic: "x"}))
	f.Add([]byte("NWAL\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, payload, n, err := decodeFrame(b, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrCorruptFrame) {
				t.Fatalf("error %v does not wrap ErrCorruptFrame", err)
			}
			return
		}
		if n != frameHeaderSize+len(payload) || n > len(b) || len(payload) == 0 {
			t.Fatalf("n %d, payload %d, input %d", n, len(payload), len(b))
		}
		re := append(appendFrameHeader(nil), payload...)
		sealFrame(re, seq)
		if string(re) != string(b[:n]) {
			t.Fatalf("re-sealed frame differs from the input")
		}
	})
}

// FuzzScanSegment feeds arbitrary bytes to the recovery scanner: it must never panic, and what
// it accepts must be a prefix of dense, valid frames.
func FuzzScanSegment(f *testing.F) {
	two := append(buildFrame(5, testRecord(0)), buildFrame(6, testRecord(1))...)
	f.Add(two, uint64(5))
	f.Add(two[:len(two)-3], uint64(5))
	f.Add(append(append([]byte{}, two[:30]...), two...), uint64(5))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, base uint64) {
		res := scanSegment(data, base, 1<<16)
		if res.validTo > int64(len(data)) || (res.damage == nil && res.validTo != int64(len(data))) {
			t.Fatalf("validTo %d of %d, damage %v", res.validTo, len(data), res.damage)
		}
		if res.damage == nil && res.laterValid {
			t.Fatalf("laterValid without damage")
		}
		off, seq := 0, base
		for off < int(res.validTo) {
			s, _, n, err := decodeFrame(data[off:], 1<<16)
			if err != nil || s != seq {
				t.Fatalf("accepted prefix has a bad frame at %d: %v (seq %d want %d)", off, err, s, seq)
			}
			off += n
			seq++
		}
		if seq != res.next {
			t.Fatalf("next %d, walked to %d", res.next, seq)
		}
	})
}
