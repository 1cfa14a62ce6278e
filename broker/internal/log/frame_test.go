package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// buildFrames encodes entries as frames the way Commit does.
func buildFrames(t testing.TB, codec Codec, base int64, es []Entry, ts int64, splitAt int) ([]byte, []frameMeta) {
	t.Helper()
	l := &Log{opts: Options{Codec: codec}, splitAt: splitAt}
	if codec == CodecZstd {
		enc, err := zstdEncoder(LevelFastest)
		if err != nil {
			t.Fatal(err)
		}
		l.enc = enc
	}
	if err := l.encodeFrames(es, base, ts); err != nil {
		t.Fatal(err)
	}
	return l.wbuf, l.frames
}

func TestFrameRoundTripBothCodecs(t *testing.T) {
	es := testEntries("rt", 50, 200)
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			b, fms := buildFrames(t, codec, 1000, es, 42, maxInnerBytes)
			if len(fms) != 1 || fms[0].size != len(b) {
				t.Fatalf("frames %+v for %d bytes", fms, len(b))
			}
			if Codec(b[2]&codecMask) != codec {
				t.Fatalf("flags codec %d, want %d", b[2], codec)
			}
			recs, _, err := decodeFrame(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(es) {
				t.Fatalf("%d records, want %d", len(recs), len(es))
			}
			for i, r := range recs {
				if r.Offset != 1000+int64(i) || !bytes.Equal(r.Payload, es[i].Payload) || !bytes.Equal(r.Key, es[i].Key) || r.CommittedAt != 42 {
					t.Fatalf("record %d = %+v", i, r)
				}
			}
		})
	}
}

// ST-1: the CRC covers header bytes [2,23) and the payload; flipping any of them (or the
// magic) makes the frame undecodable.
func TestFrameCRCCoversHeaderFieldsAndPayload(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		good, _ := buildFrames(t, codec, 7, testEntries("crc", 5, 64), 1, maxInnerBytes)
		cases := []struct {
			field string
			at    int
			want  error
		}{
			{"magic", 0, errBadMagic},
			{"magic low", 1, errBadMagic},
			{"flags codec", 2, nil},
			{"flags high bits", 2, nil}, // bits 3–7 are ignored on read but covered by the CRC
			{"record_count", 6, nil},
			{"base_offset", 14, nil},
			{"uncompressed_len", 18, nil},
			{"stored_len", 22, nil},
			{"crc", 25, errBadCRC},
			{"payload first", frameHeaderSize, errBadCRC},
			{"payload last", len(good) - 1, errBadCRC},
		}
		for _, c := range cases {
			t.Run(codec.String()+"/"+c.field, func(t *testing.T) {
				b := append([]byte(nil), good...)
				if c.field == "flags high bits" {
					b[c.at] ^= 0x80
				} else {
					b[c.at] ^= 0x01
				}
				_, _, err := decodeFrame(b)
				if !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("decode after flipping %s: err = %v, want ErrCorruptRecord", c.field, err)
				}
				if c.want != nil && !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				if _, err := checkFrame(b); err == nil {
					t.Fatalf("checkFrame accepted a frame with %s flipped", c.field)
				}
			})
		}
	}
}

func TestFrameHeaderRejectsOutOfRangeFields(t *testing.T) {
	good, _ := buildFrames(t, CodecNone, 0, testEntries("h", 2, 10), 1, maxInnerBytes)
	set32 := func(at int, v uint32) func([]byte) {
		return func(b []byte) { binary.BigEndian.PutUint32(b[at:], v) }
	}
	cases := map[string]func([]byte){
		"zero count":          set32(3, 0),
		"negative count":      set32(3, 0x80000000),
		"negative base":       func(b []byte) { binary.BigEndian.PutUint64(b[7:], 1<<63) },
		"zero ulen":           set32(15, 0),
		"ulen over max":       set32(15, maxFrameBytes+1),
		"slen over max":       set32(19, maxFrameBytes+1),
		"zero slen":           set32(19, 0),
		"none with slen≠ulen": set32(19, 5),
		"count over ulen/4":   set32(3, 1<<20),
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			b := append([]byte(nil), good...)
			mut(b)
			if _, err := parseFrameHeader(b); !errors.Is(err, errBadHeader) {
				t.Fatalf("err = %v, want errBadHeader", err)
			}
		})
	}
}

func TestFrameDecodeRejectsPayloadNotMatchingCount(t *testing.T) {
	// A CRC-valid frame whose payload does not split into record_count records is corrupt.
	inner := appendRecords(nil, testEntries("p", 3, 8), 1)
	cases := map[string]struct {
		inner []byte
		count int32
	}{
		"fewer records than count": {inner, 4},
		"trailing bytes":           {append(append([]byte(nil), inner...), 0, 0), 3},
		"bad envelope":             {append([]byte{0, 0, 0, 1}, 0x01), 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := make([]byte, frameHeaderSize, frameHeaderSize+len(c.inner))
			b = append(b, c.inner...)
			putFrameHeader(b, frameHeader{codec: CodecNone, count: c.count, base: 0, ulen: int32(len(c.inner)), slen: int32(len(c.inner))})
			sealFrame(b)
			if _, _, err := decodeFrame(b); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("err = %v, want ErrCorruptRecord", err)
			}
		})
	}
}

func TestFrameWriterSplitsKeepingOffsetsContiguous(t *testing.T) {
	es := testEntries("s", 10, 100)
	per := recordPrefix + EnvelopeLen(es[0].Key, es[0].Payload)
	b, fms := buildFrames(t, CodecNone, 500, es, 9, 3*per) // three records per frame
	if len(fms) != 4 {
		t.Fatalf("%d frames, want 4", len(fms))
	}
	next := int64(500)
	for _, fm := range fms {
		recs, _, err := decodeFrame(b[fm.rel : fm.rel+fm.size])
		if err != nil {
			t.Fatal(err)
		}
		if recs[0].Offset != next {
			t.Fatalf("frame starts at %d, want %d", recs[0].Offset, next)
		}
		next += int64(len(recs))
	}
	if next != 510 {
		t.Fatalf("frames end at %d, want 510", next)
	}
}
