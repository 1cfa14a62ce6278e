package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// EncodingBase64 is the only payload_encoding value (§2.8, §2.10).
const EncodingBase64 = "base64"

// ErrBadPayload is returned by Message.Bytes for a payload that breaks the §2.10 encoding
// (an unknown payload_encoding, or base64 that does not decode).
var ErrBadPayload = errors.New("malformed payload")

// Message is the Message object of docs/internals/http-api.md §2.9. Payload holds the JSON value exactly as
// the server sent it; use Bytes for the stored bytes. Timestamp is Unix seconds. Key is ""
// for a keyless message; ReceiptHandle is "" on replay reads.
type Message struct {
	Topic           string          `json:"topic"`
	Partition       int             `json:"partition"`
	Offset          int64           `json:"offset"`
	Key             string          `json:"key,omitempty"`
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`
	Timestamp       int64           `json:"timestamp"`
	ReceiptHandle   string          `json:"receipt_handle,omitempty"`
}

// PayloadKind says how a message payload was encoded in a response (§2.10).
type PayloadKind int

// Payload kinds.
const (
	PayloadJSON   PayloadKind = iota // a JSON text (not a string), embedded verbatim
	PayloadText                      // a JSON string: text, or a produced JSON string literal
	PayloadBinary                    // base64, payload_encoding "base64"
)

// Kind classifies the payload: binary when payload_encoding is base64, text when the payload
// is a JSON string, JSON otherwise.
func (m Message) Kind() PayloadKind {
	switch {
	case m.PayloadEncoding == EncodingBase64:
		return PayloadBinary
	case len(bytes.TrimLeft(m.Payload, " \t\r\n")) > 0 && bytes.TrimLeft(m.Payload, " \t\r\n")[0] == '"':
		return PayloadText
	default:
		return PayloadJSON
	}
}

// Bytes returns the message bytes by the §2.10 consumer rule: with payload_encoding
// "base64" the decoded string; a JSON string payload gives the string's UTF-8 content; any
// other payload is the JSON text as received, byte for byte. (A produced JSON string literal
// such as the 4 bytes "hi" and the text hi both come back as the 2 bytes hi.)
func (m Message) Bytes() ([]byte, error) {
	switch m.PayloadEncoding {
	case "":
	case EncodingBase64:
		var s string
		if err := json.Unmarshal(m.Payload, &s); err != nil {
			return nil, fmt.Errorf("%w: base64 payload is not a JSON string", ErrBadPayload)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("%w: unknown payload_encoding %q", ErrBadPayload, m.PayloadEncoding)
	}
	if m.Kind() == PayloadText {
		var s string
		if err := json.Unmarshal(m.Payload, &s); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		return []byte(s), nil
	}
	return bytes.Clone(m.Payload), nil
}

// BatchRecord is one record of a batch produce (§2.8). Payload is any JSON value except
// null; with PayloadEncoding "base64" it must be a padded standard base64 string. Build one
// from raw bytes with NewBatchRecord. Payload is sent compacted (insignificant whitespace
// removed), so embed only compact JSON when the exact bytes matter.
type BatchRecord struct {
	Key             string          `json:"key,omitempty"`
	Partition       *int            `json:"partition,omitempty"`
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`

	// compact marks a Payload built by NewBatchRecord: known to be compact JSON, so the
	// request encoder copies it instead of compacting it again.
	compact bool
}

// NewBatchRecord returns a record whose stored bytes will be exactly b: compact JSON objects
// and arrays are embedded as they are, other valid UTF-8 is sent as a JSON string, anything
// else as base64.
func NewBatchRecord(key string, b []byte) BatchRecord {
	r := BatchRecord{Key: key, compact: true}
	switch {
	case len(b) > 0 && (b[0] == '{' || b[0] == '[') && isCompactJSON(b):
		r.Payload = bytes.Clone(b)
	case utf8.Valid(b):
		r.Payload, _ = marshalString(string(b))
	default:
		r.Payload, _ = json.Marshal(base64.StdEncoding.EncodeToString(b))
		r.PayloadEncoding = EncodingBase64
	}
	return r
}

// NewBase64BatchRecord returns a record whose payload is always sent base64-encoded: the
// stored bytes are exactly b and the encoded payload is exactly 4/3 of len(b) plus padding and
// quotes, whatever b holds (NewBatchRecord's JSON-string form can grow up to 6× for control
// bytes). For copiers that must bound a batch's encoded size.
func NewBase64BatchRecord(key string, b []byte) BatchRecord {
	p := make([]byte, base64.StdEncoding.EncodedLen(len(b))+2)
	p[0], p[len(p)-1] = '"', '"'
	base64.StdEncoding.Encode(p[1:len(p)-1], b)
	return BatchRecord{Key: key, Payload: p, PayloadEncoding: EncodingBase64, compact: true}
}

// isCompactJSON reports whether b is valid JSON that compaction leaves unchanged.
func isCompactJSON(b []byte) bool {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return false
	}
	return bytes.Equal(buf.Bytes(), b)
}

// marshalString encodes s as a JSON string without HTML escaping.
func marshalString(s string) (json.RawMessage, error) {
	b, err := marshalJSON(s)
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(b, "\n"), nil
}
