package api

import (
	"encoding/base64"
	"unicode/utf8"

	"narad.dev/broker/internal/service"
)

// parseBatchFast is the batch produce hot path: one pass over the body for the common shape
// (lowercase field names without escapes, string payloads without escapes, plain non-negative
// integer partitions). It is conservative by design: ok=true only for bodies the strict
// decoder (decodeBatch) accepts with exactly the same records; anything unusual — escapes,
// non-string payloads, nulls, duplicate or unknown fields, invalid UTF-8, limits — returns
// ok=false and the caller falls back to decodeBatch, which also produces the exact error.
// FuzzBatchFastPathMatchesStrictDecoder holds it to that.
//
// Payload and key bytes alias body.
func parseBatchFast(body []byte) (recs []service.ProduceRecord, ok bool) {
	p := fastParser{b: body}
	if !p.expect('{') || !p.literalKey("records") || !p.expect(':') || !p.expect('[') {
		return nil, false
	}
	recs = make([]service.ProduceRecord, 0, 64)
	for {
		rec, ok := p.record()
		if !ok || len(recs) == maxBatchRecords {
			return nil, false
		}
		recs = append(recs, rec)
		switch p.next() {
		case ',':
			continue
		case ']':
		default:
			return nil, false
		}
		break
	}
	if !p.expect('}') {
		return nil, false
	}
	p.ws()
	return recs, p.i == len(p.b)
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next skips whitespace and consumes one byte (0 at the end).
func (p *fastParser) next() byte {
	p.ws()
	if p.i >= len(p.b) {
		return 0
	}
	c := p.b[p.i]
	p.i++
	return c
}

func (p *fastParser) expect(c byte) bool { return p.next() == c }

// str consumes a string without escapes whose bytes are valid UTF-8 and ≥ 0x20, returning its
// content.
func (p *fastParser) str() ([]byte, bool) {
	if p.next() != '"' {
		return nil, false
	}
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		p.i += plainPrefixLen(p.b[p.i:]) // runs of plain ASCII, eight bytes a step
		if p.i >= len(p.b) {
			break
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		ascii = false // c ≥ 0x80
		p.i++
	}
	return nil, false
}

func (p *fastParser) literalKey(name string) bool {
	k, ok := p.str()
	return ok && string(k) == name
}

// uint consumes a plain non-negative decimal integer of at most 9 digits, no leading zeros.
func (p *fastParser) uint() (int, bool) {
	p.ws()
	start, n := p.i, 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 9 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E', '-', '+':
			return 0, false
		}
	}
	return n, true
}

// record consumes one record object.
func (p *fastParser) record() (service.ProduceRecord, bool) {
	rec := service.ProduceRecord{Partition: -1}
	if !p.expect('{') {
		return rec, false
	}
	var seen [4]bool // key, partition, payload, payload_encoding
	var payload []byte
	base64Enc := false
	for {
		k, ok := p.str()
		if !ok || !p.expect(':') {
			return rec, false
		}
		var idx int
		switch string(k) {
		case "key":
			idx = 0
			v, ok := p.str()
			if !ok || len(v) > maxKeyBytes {
				return rec, false
			}
			rec.Key = string(v)
		case "partition":
			idx = 1
			n, ok := p.uint()
			if !ok {
				return rec, false
			}
			rec.Partition = n
		case "payload":
			idx = 2
			v, ok := p.str()
			if !ok {
				return rec, false
			}
			payload = v
		case "payload_encoding":
			idx = 3
			v, ok := p.str()
			if !ok || string(v) != "base64" {
				return rec, false
			}
			base64Enc = true
		default:
			return rec, false
		}
		if seen[idx] {
			return rec, false
		}
		seen[idx] = true
		switch p.next() {
		case ',':
			continue
		case '}':
		default:
			return rec, false
		}
		break
	}
	if !seen[2] {
		return rec, false
	}
	if base64Enc {
		b, err := base64.StdEncoding.DecodeString(string(payload))
		if err != nil {
			return rec, false
		}
		payload = b
	}
	if len(payload) == 0 || len(payload) > maxPayloadBytes {
		return rec, false
	}
	rec.Payload = payload
	return rec, true
}

// parseAckBatchFast is the ack batch hot path, with the same contract as parseBatchFast: ok
// only for bodies of the plain shape {"acks":[{"receipt_handle":"…","extend":"…"},…]}
// (lowercase keys, strings without escapes, each key at most once) that decodeStrict decodes
// to exactly the same value; anything else falls back to decodeStrict.
func parseAckBatchFast(body []byte) (ackBatchBody, bool) {
	p := fastParser{b: body}
	var out ackBatchBody
	if !p.expect('{') || !p.literalKey("acks") || !p.expect(':') || !p.expect('[') {
		return out, false
	}
	out.Acks = make([]ackBatchEntry, 0, 64)
	for {
		if !p.expect('{') {
			return out, false
		}
		var e ackBatchEntry
		var seenHandle, seenExtend bool
		for {
			k, ok := p.str()
			if !ok || !p.expect(':') {
				return out, false
			}
			v, ok := p.str()
			if !ok {
				return out, false
			}
			switch string(k) {
			case "receipt_handle":
				if seenHandle {
					return out, false
				}
				seenHandle, e.ReceiptHandle = true, string(v)
			case "extend":
				if seenExtend {
					return out, false
				}
				ext := string(v)
				seenExtend, e.Extend = true, &ext
			default:
				return out, false
			}
			switch p.next() {
			case ',':
				continue
			case '}':
			default:
				return out, false
			}
			break
		}
		out.Acks = append(out.Acks, e)
		switch p.next() {
		case ',':
			continue
		case ']':
		default:
			return out, false
		}
		break
	}
	if !p.expect('}') {
		return out, false
	}
	p.ws()
	return out, p.i == len(p.b)
}
