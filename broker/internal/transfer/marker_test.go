package transfer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func sampleMarker() Marker {
	return Marker{Topic: "orders", Partition: 3, Incarnation: "0123456789abcdef", From: "narad-0",
		To: "narad-3", HWM: 1234, InstalledAtMs: 1_700_000_000_000, DurableAtMs: 1_700_000_000_001,
		Links: []Link{{Child: "orders-audit", Epoch: "fedcba9876543210"}}}
}

func TestMarkerRoundTrip(t *testing.T) {
	m := sampleMarker()
	b := EncodeMarker(m)
	if !bytes.HasPrefix(b, []byte(`{"crc":"`)) || b[len(b)-1] != '\n' {
		t.Fatalf("encoding %q is not one line starting with the crc", b)
	}
	got, err := DecodeMarker(b)
	if err != nil {
		t.Fatal(err)
	}
	m.V = 1
	if got.Topic != m.Topic || got.HWM != m.HWM || got.DurableAtMs != m.DurableAtMs || len(got.Links) != 1 || got.Links[0] != m.Links[0] || got.V != 1 {
		t.Fatalf("round trip: got %+v, want %+v", got, m)
	}
}

func TestMarkerWithoutDurableStampOmitsIt(t *testing.T) {
	m := sampleMarker()
	m.DurableAtMs = 0
	b := EncodeMarker(m)
	if bytes.Contains(b, []byte("durable_at_ms")) {
		t.Fatalf("an older destination's marker must omit durable_at_ms: %s", b)
	}
	got, err := DecodeMarker(b)
	if err != nil || got.DurableAtMs != 0 {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

func TestMarkerRejectsEveryFlippedByte(t *testing.T) {
	b := EncodeMarker(sampleMarker())
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x01
		if _, err := DecodeMarker(c); err == nil {
			t.Fatalf("flipping byte %d (%q) still decodes", i, b[i])
		}
	}
}

func TestMarkerRejectsEveryTruncation(t *testing.T) {
	b := EncodeMarker(sampleMarker())
	for n := 0; n < len(b); n++ {
		if _, err := DecodeMarker(b[:n]); err == nil {
			t.Fatalf("truncation to %d bytes decodes", n)
		}
	}
}

func TestReadWriteMarker(t *testing.T) {
	dir := t.TempDir()
	if _, found, err := ReadMarker(dir); found || err != nil {
		t.Fatalf("empty dir: found=%v err=%v", found, err)
	}
	if err := WriteMarker(dir, sampleMarker()); err != nil {
		t.Fatal(err)
	}
	m, found, err := ReadMarker(dir)
	if !found || err != nil || m.From != "narad-0" {
		t.Fatalf("read back: %+v %v %v", m, found, err)
	}
	if err := os.WriteFile(filepath.Join(dir, MarkerFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, found, err := ReadMarker(dir); !found || !errors.Is(err, ErrBadMarker) {
		t.Fatalf("corrupt marker: found=%v err=%v", found, err)
	}
}

func FuzzDecodeMarker(f *testing.F) {
	f.Add(EncodeMarker(sampleMarker()))
	m := sampleMarker()
	m.Links = nil
	m.Force = true
	f.Add(EncodeMarker(m))
	f.Add([]byte(`{"crc":"00000000"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMarker(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes to the same marker.
		again, err := DecodeMarker(EncodeMarker(m))
		if err != nil {
			t.Fatalf("re-encoded marker does not decode: %v", err)
		}
		if again.Topic != m.Topic || again.HWM != m.HWM || again.From != m.From || len(again.Links) != len(m.Links) {
			t.Fatalf("re-encode changed the marker: %+v vs %+v", again, m)
		}
	})
}

func TestFenceErrorCodes(t *testing.T) {
	for _, e := range []error{ErrFreezeLapsed, ErrUnknownToken, ErrHWMMismatch} {
		if got := FenceError(e.Error()); got != e || !FenceRefused(got) {
			t.Fatalf("code %q maps to %v", e.Error(), got)
		}
	}
	if FenceRefused(ErrUnavailable) {
		t.Fatal("503 is not a fence refusal")
	}
}
