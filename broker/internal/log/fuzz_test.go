package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(EncodeEnvelope(nil, nil, 1, []byte("p")))
	f.Add(EncodeEnvelope(nil, []byte("key"), -1, nil))
	f.Add(EncodeEnvelope(nil, bytes.Repeat([]byte("k"), 200), 1<<40, []byte("payload")))
	f.Add([]byte{0x02, 0x80, 0x00})
	f.Add([]byte{0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		key, ts, payload, err := DecodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error not ErrCorruptRecord: %v", err)
			}
			return
		}
		// A decodable envelope is canonical: re-encoding reproduces it byte for byte.
		if re := EncodeEnvelope(nil, key, ts, payload); !bytes.Equal(re, b) {
			t.Fatalf("re-encode %x != input %x", re, b)
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		b, _ := buildFrames(f, codec, 3, testEntries("fz", 3, 20), 5, maxInnerBytes)
		f.Add(b, false)
		f.Add(b, true)
		f.Add(b[:len(b)-1], true)
	}
	f.Add([]byte{0xCA, 0xFE}, false)
	// reseal recomputes the CRC of a parseable header, so mutations reach the codec and the
	// record split instead of stopping at the checksum.
	f.Fuzz(func(t *testing.T, b []byte, reseal bool) {
		if h, err := parseFrameHeader(b); reseal && err == nil && int64(len(b)) >= h.size() {
			b = append([]byte(nil), b...)
			sealFrame(b[:h.size()])
		}
		recs, _, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error not ErrCorruptRecord: %v", err)
			}
			return
		}
		h, _ := parseFrameHeader(b)
		if len(recs) != int(h.count) {
			t.Fatalf("%d records, header count %d", len(recs), h.count)
		}
		for i, r := range recs {
			if r.Offset != h.base+int64(i) {
				t.Fatalf("record %d offset %d, base %d", i, r.Offset, h.base)
			}
		}
	})
}

func FuzzDecodeHWM(f *testing.F) {
	c := encodeHWM(7, true)
	d := encodeHWM(1<<40, false)
	f.Add(c[:])
	f.Add(d[:])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeHWM(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptHWM) {
				t.Fatalf("error not ErrCorruptHWM: %v", err)
			}
			return
		}
		if st.present && st.hwm < 0 {
			t.Fatalf("negative hwm %d accepted", st.hwm)
		}
		if len(b) == hwmFileSize {
			re := encodeHWM(st.hwm, st.clean)
			if !bytes.Equal(re[:8], b[:8]) {
				t.Fatalf("value did not round-trip")
			}
		}
	})
}

// FuzzRecoverSegment opens a directory whose only segment holds arbitrary bytes: Open never
// panics, and every offset below the recovered HWM reads as a record or ErrCorruptRecord.
func FuzzRecoverSegment(f *testing.F) {
	one, _ := buildFrames(f, CodecNone, 0, testEntries("a", 2, 10), 1, maxInnerBytes)
	two, _ := buildFrames(f, CodecZstd, 2, testEntries("b", 2, 10), 2, maxInnerBytes)
	good := append(append([]byte(nil), one...), two...)
	f.Add(good)
	f.Add(good[:len(good)-3])
	damaged := append([]byte(nil), good...)
	damaged[30] ^= 0xff
	f.Add(damaged)
	f.Add(append([]byte{0xCA, 0xFE, 0, 0}, good...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		seg := filepath.Join(dir, SegmentFileName(0))
		if err := os.WriteFile(seg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		h := l.HighWatermark()
		if h > l.NextOffset() {
			t.Fatalf("hwm %d > next %d", h, l.NextOffset())
		}
		for off := max(0, h-64); off < h; off++ {
			r, err := l.Read(off)
			if err != nil && !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if err == nil && r.Offset != off {
				t.Fatalf("Read(%d) returned offset %d", off, r.Offset)
			}
		}
		if l.NextOffset() > 1<<62 {
			return // a frame claimed offsets near the int64 limit; Commit refuses by design
		}
		if _, err := l.Commit(testEntries("c", 1, 4), 1); err != nil {
			t.Fatalf("commit after recovery: %v", err)
		}
	})
}
