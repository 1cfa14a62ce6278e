package client

import (
	"bytes"
	"encoding/binary"
)

// A single-pass decoder for consume answers in the shape the server writes them: one Message
// object, or {"messages":[...]} of them, with string payloads. Payload aliases the body (the
// body belongs to the call, so nothing is copied) and every message of an answer shares one
// Topic string. Anything else (other payload kinds, escapes in the string fields, unknown keys,
// numbers that are not plain integers) makes it give up, and decodeConsume falls back to the
// generic decoder; FuzzConsumeFastPathMatchesGenericDecoder checks the two agree.

// consumeScanner walks a consume body.
type consumeScanner struct {
	b     []byte
	i     int
	topic string // the last topic decoded, reused while the next one is equal
}

func (s *consumeScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat skips whitespace and consumes c, reporting whether it was there.
func (s *consumeScanner) eat(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString returns the bytes of a JSON string without escapes at the cursor.
func (s *consumeScanner) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false // escapes and non-ASCII: the generic decoder's job
		}
		s.i++
	}
	return nil, false
}

// rawString returns a whole JSON string token (quotes included) at the cursor; escapes are
// checked, not decoded.
func (s *consumeScanner) rawString() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i
	s.i++
	for s.i < len(s.b) {
		s.i += stringRunLen(s.b[s.i:])
		if s.i >= len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start:s.i:s.i], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return nil, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return nil, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return nil, false
					}
				}
				s.i += 6
			default:
				return nil, false
			}
			continue
		}
		s.i++
	}
	return nil, false
}

// stringRunLen returns the length of b's longest prefix without '"', '\\' or a control byte,
// testing eight bytes per step (a flagged word is re-checked byte by byte: the borrow of the
// subtraction can flag a byte that is fine).
func stringRunLen(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (ones * '"')
		e := x ^ (ones * '\\')
		if ((x-ones*0x20)&^x|(q-ones)&^q|(e-ones)&^e)&highs != 0 {
			for j := i; j < i+8; j++ {
				if stringStop(b[j]) {
					return j
				}
			}
		}
	}
	for ; i < len(b); i++ {
		if stringStop(b[i]) {
			return i
		}
	}
	return i
}

func stringStop(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// int parses a plain JSON integer of at most 18 digits (no fraction or exponent).
func (s *consumeScanner) int() (int64, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var v int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	if n == 0 || n > 18 || (n > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// message decodes one Message object; the cursor is just past its '{'.
func (s *consumeScanner) message(m *Message) bool {
	var seen uint8
	for first := true; ; first = false {
		if s.eat('}') {
			return true
		}
		if !first && !s.eat(',') {
			return false
		}
		key, ok := s.plainString()
		if !ok || !s.eat(':') {
			return false
		}
		var bit uint8
		switch string(key) {
		case "topic":
			bit = 1
			t, ok := s.plainString()
			if !ok {
				return false
			}
			if string(t) != s.topic {
				s.topic = string(t)
			}
			m.Topic = s.topic
		case "partition":
			bit = 2
			v, ok := s.int()
			if !ok || v != int64(int(v)) {
				return false
			}
			m.Partition = int(v)
		case "offset":
			bit = 4
			v, ok := s.int()
			if !ok {
				return false
			}
			m.Offset = v
		case "key":
			bit = 8
			k, ok := s.plainString()
			if !ok {
				return false
			}
			m.Key = string(k)
		case "payload":
			bit = 16
			p, ok := s.rawString()
			if !ok {
				return false
			}
			m.Payload = p
		case "payload_encoding":
			bit = 32
			e, ok := s.plainString()
			if !ok {
				return false
			}
			m.PayloadEncoding = string(e)
		case "timestamp":
			bit = 64
			v, ok := s.int()
			if !ok {
				return false
			}
			m.Timestamp = v
		case "receipt_handle":
			bit = 128
			h, ok := s.plainString()
			if !ok {
				return false
			}
			m.ReceiptHandle = string(h)
		default:
			return false
		}
		if seen&bit != 0 {
			return false // a repeated key: leave it to the generic decoder
		}
		seen |= bit
	}
}

// decodeConsumeFast decodes body when it has the server's shape; ok is false when it does not
// (the caller then uses the generic decoder). An empty messages list yields nil.
func decodeConsumeFast(body []byte) (msgs []Message, ok bool) {
	s := consumeScanner{b: body}
	if !s.eat('{') {
		return nil, false
	}
	save := s.i
	key, ok := s.plainString()
	if !ok {
		return nil, false
	}
	if string(key) != "messages" {
		s.i = save
		var m Message
		if !s.message(&m) || !s.end() {
			return nil, false
		}
		return []Message{m}, true
	}
	if !s.eat(':') || !s.eat('[') {
		return nil, false
	}
	if s.eat(']') {
		if !s.eat('}') || !s.end() {
			return nil, false
		}
		return nil, true
	}
	msgs = make([]Message, 0, 1+countMessages(body[s.i:]))
	for {
		if !s.eat('{') {
			return nil, false
		}
		msgs = append(msgs, Message{})
		if !s.message(&msgs[len(msgs)-1]) {
			return nil, false
		}
		if s.eat(']') {
			break
		}
		if !s.eat(',') {
			return nil, false
		}
	}
	if !s.eat('}') || !s.end() {
		return nil, false
	}
	return msgs, true
}

// end reports whether only whitespace is left.
func (s *consumeScanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// countMessages estimates the messages in the rest of a list (for the slice's capacity): the
// server writes "},{" between two of them.
func countMessages(b []byte) int { return bytes.Count(b, []byte("},{")) }
