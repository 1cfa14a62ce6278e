package wal

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestRecordRoundTripsFormat2(t *testing.T) {
	cases := []struct {
		name string
		rec  Record
	}{
		{"full", Record{Topic: "t", Incarnation: "i", Key: "k", Partition: 7, AcceptedAtMs: 1234, Payload: []byte("p")}},
		{"keyless", Record{Topic: "orders", Incarnation: "abc", Partition: 0, AcceptedAtMs: 1, Payload: []byte("{}")}},
		{"empty payload", Record{Topic: "t", Payload: []byte{}}},
		{"max partition", Record{Topic: "t", Partition: ^uint32(0), AcceptedAtMs: -1, Payload: []byte{0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeRecord(tc.rec)
			if len(b) != EncodedLen(tc.rec) || b[0] != recordFormat2 {
				t.Fatalf("encoding: len %d (want %d), format %d", len(b), EncodedLen(tc.rec), b[0])
			}
			got, err := DecodeRecord(b)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if !sameRecord(got, tc.rec) {
				t.Fatalf("got %+v, want %+v", got, tc.rec)
			}
		})
	}
}

// encodeFormat1 writes the v1 layout: no incarnation field.
func encodeFormat1(r Record) []byte {
	b := []byte{recordFormat1}
	b = appendString(b, r.Topic)
	b = appendString(b, r.Key)
	b = binary.BigEndian.AppendUint32(b, r.Partition)
	b = binary.BigEndian.AppendUint64(b, uint64(r.AcceptedAtMs))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Payload)))
	return append(b, r.Payload...)
}

func TestRecordFormat1DecodesWithUnknownIncarnation(t *testing.T) {
	want := Record{Topic: "legacy", Key: "k1", Partition: 3, AcceptedAtMs: 99, Payload: []byte("hello")}
	got, err := DecodeRecord(encodeFormat1(want))
	if err != nil {
		t.Fatalf("DecodeRecord(format 1): %v", err)
	}
	if got.Incarnation != "" || !sameRecord(got, want) {
		t.Fatalf("got %+v, want %+v with empty incarnation", got, want)
	}
}

func TestRecordDecoderRejectsMalformed(t *testing.T) {
	good := EncodeRecord(Record{Topic: "t", Incarnation: "i", Key: "k", Partition: 1, AcceptedAtMs: 2, Payload: []byte("xyz")})
	unknown := append([]byte{}, good...)
	unknown[0] = 3
	zero := append([]byte{}, good...)
	zero[0] = 0
	hugeLen := append([]byte{}, good...)
	binary.BigEndian.PutUint32(hugeLen[1:], 1<<31)
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown format 3", unknown},
		{"format 0", zero},
		{"truncated by one", good[:len(good)-1]},
		{"header only", good[:1]},
		{"trailing byte", append(append([]byte{}, good...), 0)},
		{"length past end", hugeLen},
		{"format 1 with trailing byte", append(encodeFormat1(Record{Topic: "t"}), 9)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeRecord(tc.b); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("DecodeRecord = %v, want ErrCorruptRecord", err)
			}
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeRecord(Record{Topic: "t", Incarnation: "i", Key: "k", Partition: 1, AcceptedAtMs: 2, Payload: []byte("p")}))
	f.Add(EncodeRecord(Record{}))
	f.Add(encodeFormat1(Record{Topic: "t", Key: "k", Payload: []byte("v1")}))
	f.Add([]byte{2, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error %v does not wrap ErrCorruptRecord", err)
			}
			return
		}
		again, err := DecodeRecord(EncodeRecord(r))
		if err != nil || !sameRecord(again, r) {
			t.Fatalf("re-encode round trip: %+v vs %+v (%v)", again, r, err)
		}
		if b[0] == recordFormat2 && string(EncodeRecord(r)) != string(b) {
			t.Fatalf("format 2 re-encoding differs from the input")
		}
	})
}
