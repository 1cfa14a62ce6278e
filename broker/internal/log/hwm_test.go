package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func TestHWMFileFormat(t *testing.T) {
	b := encodeHWM(0x0102030405060708, true)
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1}
	if string(b[:12]) != string(want) {
		t.Fatalf("layout %x", b)
	}
	cases := []struct {
		name    string
		in      []byte
		want    hwmState
		wantErr bool
	}{
		{"empty = no file", nil, hwmState{}, false},
		{"clean", func() []byte { b := encodeHWM(42, true); return b[:] }(), hwmState{hwm: 42, clean: true, present: true}, false},
		{"dirty", func() []byte { b := encodeHWM(42, false); return b[:] }(), hwmState{hwm: 42, present: true}, false},
		{"unknown flag bits ignored", func() []byte {
			b := encodeHWM(5, false)
			binary.BigEndian.PutUint32(b[8:], 0x100)
			binary.BigEndian.PutUint32(b[12:], crcOf(b[:12]))
			return b[:]
		}(), hwmState{hwm: 5, present: true}, false},
		{"legacy 8 bytes", binary.BigEndian.AppendUint64(nil, 77), hwmState{hwm: 77, present: true, legacy: true}, false},
		{"bad crc", func() []byte { b := encodeHWM(42, true); b[0] ^= 1; return b[:] }(), hwmState{}, true},
		{"negative", func() []byte { b := encodeHWM(-1, true); return b[:] }(), hwmState{}, true},
		{"wrong size", make([]byte, 12), hwmState{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeHWM(c.in)
			if c.wantErr {
				if !errors.Is(err, ErrCorruptHWM) {
					t.Fatalf("err = %v, want ErrCorruptHWM", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
