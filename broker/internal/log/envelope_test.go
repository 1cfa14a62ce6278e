package log

import (
	"bytes"
	"errors"
	"testing"
)

func TestEnvelopeRoundTripPreservesKeyTimeAndPayload(t *testing.T) {
	long := bytes.Repeat([]byte("k"), 300) // two-byte uvarint
	cases := []struct {
		name    string
		key     []byte
		ts      int64
		payload []byte
	}{
		{"keyless", nil, 1700000000123, []byte("hello")},
		{"keyed", []byte("user-42"), 1, []byte(`{"a":1}`)},
		{"long key", long, -5, []byte("x")},
		{"empty payload", []byte("k"), 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := EncodeEnvelope([]byte("prefix"), c.key, c.ts, c.payload)
			if !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatal("EncodeEnvelope did not append to dst")
			}
			b = b[len("prefix"):]
			if len(b) != EnvelopeLen(c.key, c.payload) {
				t.Fatalf("len %d, EnvelopeLen %d", len(b), EnvelopeLen(c.key, c.payload))
			}
			k, ts, p, err := DecodeEnvelope(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(k, c.key) || ts != c.ts || !bytes.Equal(p, c.payload) {
				t.Fatalf("got %q %d %q", k, ts, p)
			}
			if len(c.key) == 0 && k != nil {
				t.Fatal("keyless record decoded with a non-nil key")
			}
		})
	}
}

func TestEnvelopeRejectsMalformedAsCorrupt(t *testing.T) {
	good := EncodeEnvelope(nil, []byte("key"), 7, []byte("payload"))
	v1 := append([]byte(nil), good...)
	v1[0] = 0x01
	cases := map[string][]byte{
		"empty":              nil,
		"version 1":          v1,
		"version ff":         append([]byte{0xff}, good[1:]...),
		"short":              good[:5],
		"key overruns":       {0x02, 0x20, 'a', 0, 0, 0, 0, 0, 0, 0, 0},
		"no room for time":   {0x02, 0x00, 0, 0, 0, 0, 0, 0, 0},
		"non-minimal varint": {0x02, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 0, 0},
		"varint overflow":    {0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, _, err := DecodeEnvelope(b); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("err = %v, want ErrCorruptRecord", err)
			}
		})
	}
}
