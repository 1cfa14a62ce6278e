package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"narad.dev/broker/internal/service"
)

// refAppendPayload is appendPayload without its fast paths (§2.10 as written).
func refAppendPayload(dst, p []byte) ([]byte, bool) {
	if utf8.Valid(p) {
		if json.Valid(p) {
			return append(dst, p...), false
		}
		return appendJSONString(dst, string(p)), false
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, p)
	return append(dst, '"'), true
}

func naivePlainPrefixLen(p []byte) int {
	for i, c := range p {
		if !plainByte(c) {
			return i
		}
	}
	return len(p)
}

// FuzzAppendPayloadMatchesReference: the fast paths (plain ASCII scan, JSON pre-check) give the
// same bytes as the plain §2.10 rule for any stored payload.
func FuzzAppendPayloadMatchesReference(f *testing.F) {
	for _, s := range []string{"", "hi", "nb0123456789-abcdefghijklmnopqrstuvwxyz", "null", "nul", "true", "tru",
		"false", " 12 ", "-1", "[1,2]", "{}", `{"a":1}`, `"q"`, "a\"b", "a\\b", "\x7f\x1f", "é€", "\xff",
		"\u2028", strings.Repeat("x", 37) + "\"", strings.Repeat("y", 64), " \t\r\n", "1e5", "[", "nb !#$%&'()*+,-./"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := plainPrefixLen(p), naivePlainPrefixLen(p); got != want {
			t.Fatalf("plainPrefixLen(%q) = %d, want %d", p, got, want)
		}
		if !mayBeJSON(p) && json.Valid(p) {
			t.Fatalf("mayBeJSON(%q) = false for valid JSON", p)
		}
		got, gb := appendPayload([]byte("x"), p)
		want, wb := refAppendPayload([]byte("x"), p)
		if !bytes.Equal(got, want) || gb != wb {
			t.Fatalf("appendPayload(%q) = %q %v, want %q %v", p, got, gb, want, wb)
		}
	})
}

func TestPlainPrefixLenEveryByteEveryPosition(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 24; pos++ {
			p := bytes.Repeat([]byte{'a'}, 24)
			p[pos] = byte(c)
			if got, want := plainPrefixLen(p), naivePlainPrefixLen(p); got != want {
				t.Fatalf("byte %#x at %d: %d, want %d", c, pos, got, want)
			}
		}
	}
}

func BenchmarkEncodeMessagesBatch(b *testing.B) {
	body := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), 30)[:1024]
	copy(body, "nb0123456789-")
	msgs := make([]service.Message, 100)
	for i := range msgs {
		msgs[i] = service.Message{Topic: "bench-batch", Partition: 1, Offset: int64(1000 + i), Payload: body,
			CommittedAtMs: 1700000000000, ReceiptHandle: "1:1000:1234567"}
	}
	b.SetBytes(int64(len(body) * len(msgs)))
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeMessages(nil, msgs, true)
	}
}

// BenchmarkAppendPayload compares the fast path with the plain rule on a bench payload.
func BenchmarkAppendPayload(b *testing.B) {
	body := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), 30)[:1024]
	copy(body, "nb0123456789-")
	dst := make([]byte, 0, 2048)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			dst, _ = appendPayload(dst[:0], body)
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			dst, _ = refAppendPayload(dst[:0], body)
		}
	})
}

// FuzzAckResultsEncoding: the batch ack answer decodes to the results it was built from.
func FuzzAckResultsEncoding(f *testing.F) {
	f.Add(204, "", 410, "lease expired <&>\u2028")
	f.Fuzz(func(t *testing.T, s1 int, e1 string, s2 int, e2 string) {
		in := []ackResult{{Status: s1, Error: e1}, {Status: s2, Error: e2}}
		b := encodeAckResults(in)
		var out struct {
			Results []ackResult `json:"results"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		for i := range in {
			want := in[i]
			m, _ := json.Marshal(want.Error) // invalid UTF-8 decodes as encoding/json's would
			_ = json.Unmarshal(m, &want.Error)
			if len(out.Results) != 2 || out.Results[i] != want {
				t.Fatalf("%q decoded to %+v, want %+v", b, out.Results, in)
			}
		}
	})
}
