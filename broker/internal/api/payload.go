package api

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"narad.dev/broker/internal/service"
)

// appendPayload appends the "payload" value for stored bytes p per docs/internals/http-api.md §2.10 and reports
// whether it is base64: valid UTF-8 that is a JSON text is embedded byte-for-byte
// (whitespace included); other valid UTF-8 becomes a JSON string whose value is exactly p;
// anything else is standard padded base64 in a JSON string. UTF-8 is checked first so the
// response itself is always valid UTF-8.
func appendPayload(dst, p []byte) (out []byte, base64Encoded bool) {
	// Fast path: printable ASCII without '"' or '\\' is valid UTF-8 and needs no escaping, so
	// unless it is a JSON text it goes out between quotes as it is (one scan, one copy).
	if plainPrefixLen(p) == len(p) {
		if mayBeJSON(p) && json.Valid(p) {
			return append(dst, p...), false
		}
		dst = append(dst, '"')
		dst = append(dst, p...)
		return append(dst, '"'), false
	}
	if utf8.Valid(p) {
		if mayBeJSON(p) && json.Valid(p) {
			return append(dst, p...), false
		}
		return appendJSONString(dst, string(p)), false
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, p)
	return append(dst, '"'), true
}

// mayBeJSON is a cheap pre-check of json.Valid: false only for bytes json.Valid rejects (a
// JSON text starts, after whitespace, with one of {["-0-9 or the literals true, false, null).
func mayBeJSON(p []byte) bool {
	i := 0
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	if i == len(p) {
		return false
	}
	switch c := p[i]; {
	case c == '{', c == '[', c == '"', c == '-', c >= '0' && c <= '9':
		return true
	case c == 't':
		return bytes.HasPrefix(p[i:], []byte("true"))
	case c == 'f':
		return bytes.HasPrefix(p[i:], []byte("false"))
	case c == 'n':
		return bytes.HasPrefix(p[i:], []byte("null"))
	}
	return false
}

// SWAR constants for plainPrefixLen: one byte value repeated in every byte of a word.
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// plainPrefixLen returns the length of p's longest prefix of bytes 0x20…0x7f other than '"' and
// '\\': bytes a JSON string carries as they are. Eight bytes are tested per step: a word has
// no byte to stop at when no byte has its high bit set, none is below 0x20 and none equals '"'
// or '\\' (the usual "has a zero byte" test on x XOR the repeated character).
func plainPrefixLen(p []byte) int {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x := binary.LittleEndian.Uint64(p[i:])
		q := x ^ (swarOnes * '"')
		b := x ^ (swarOnes * '\\')
		stop := (x | // high bit set: non-ASCII
			((x - swarOnes*0x20) & ^x) | // a byte below 0x20 (exact while no high bit is set)
			((q - swarOnes) & ^q) | // a '"'
			((b - swarOnes) & ^b)) & swarHighs // a '\\'
		if stop != 0 && !plainBytes(p[i:i+8]) { // the test may flag a plain word: check it
			break
		}
	}
	for ; i < len(p); i++ {
		if !plainByte(p[i]) {
			return i
		}
	}
	return i
}

func plainByte(c byte) bool { return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' }

func plainBytes(p []byte) bool {
	for _, c := range p {
		if !plainByte(c) {
			return false
		}
	}
	return true
}

// appendJSONString appends s as a JSON string: '"', '\\' and control characters are escaped,
// as are U+2028/U+2029 (so the output is also safe inside JavaScript). s must be valid UTF-8
// for the value to round-trip exactly (invalid bytes become U+FFFD, as encoding/json does).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendMessage appends the Message object of docs/internals/http-api.md §2.9 with its fields in the documented
// order: topic, partition, offset, key (omitted when empty), payload, payload_encoding
// (only "base64"), timestamp (Unix seconds), receipt_handle (omitted on replay).
func appendMessage(dst []byte, m *service.Message) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, m.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(m.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, m.Offset, 10)
	if len(m.Key) > 0 {
		dst = append(dst, `,"key":`...)
		dst = appendJSONString(dst, string(m.Key))
	}
	dst = append(dst, `,"payload":`...)
	dst, b64 := appendPayload(dst, m.Payload)
	if b64 {
		dst = append(dst, `,"payload_encoding":"base64"`...)
	}
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, m.CommittedAtMs/1000, 10)
	if m.ReceiptHandle != "" {
		dst = append(dst, `,"receipt_handle":`...)
		dst = appendJSONString(dst, m.ReceiptHandle)
	}
	return append(dst, '}')
}

// encodeMessages encodes a consume answer: one Message object, or {"messages":[...]} when
// multi, followed by "\n".
func encodeMessages(dst []byte, msgs []service.Message, multi bool) []byte {
	size := 16
	for i := range msgs {
		// Worst case of the base64 form (4/3) plus the fixed fields; JSON text needs less.
		size += len(msgs[i].Payload)*4/3 + len(msgs[i].Key) + len(msgs[i].Topic) + len(msgs[i].ReceiptHandle) + 160
	}
	dst = slices.Grow(dst[:0], size)
	if !multi {
		dst = appendMessage(dst, &msgs[0])
		return append(dst, '\n')
	}
	dst = append(dst, `{"messages":[`...)
	for i := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendMessage(dst, &msgs[i])
	}
	return append(dst, "]}\n"...)
}
