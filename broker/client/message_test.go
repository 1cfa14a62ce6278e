package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestMessageBytesFollowsConsumerRule(t *testing.T) {
	cases := []struct {
		name     string
		payload  string
		encoding string
		want     string
		kind     PayloadKind
	}{
		{"json object kept byte for byte", `{ "a" : [1, 2] }`, "", `{ "a" : [1, 2] }`, PayloadJSON},
		{"json number", `42`, "", `42`, PayloadJSON},
		{"json null", `null`, "", `null`, PayloadJSON},
		{"text is the decoded string", `"hello world"`, "", "hello world", PayloadText},
		{"escaped text decodes", `"line\nnext \u00e9 \"q\""`, "", "line\nnext é \"q\"", PayloadText},
		{"json string literal comes back unquoted", `"hi"`, "", "hi", PayloadText},
		{"base64 decodes to binary", `"AAEC/w=="`, "base64", "\x00\x01\x02\xff", PayloadBinary},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Message{Payload: json.RawMessage(tc.payload), PayloadEncoding: tc.encoding}
			got, err := m.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("Bytes() = %q, want %q", got, tc.want)
			}
			if m.Kind() != tc.kind {
				t.Fatalf("Kind() = %v, want %v", m.Kind(), tc.kind)
			}
		})
	}
}

func TestMessageBytesRejectsMalformedEncodings(t *testing.T) {
	for name, m := range map[string]Message{
		"bad base64":          {Payload: json.RawMessage(`"!!!"`), PayloadEncoding: "base64"},
		"base64 not string":   {Payload: json.RawMessage(`{}`), PayloadEncoding: "base64"},
		"unknown encoding":    {Payload: json.RawMessage(`"x"`), PayloadEncoding: "hex"},
		"unterminated string": {Payload: json.RawMessage(`"abc`)},
	} {
		if _, err := m.Bytes(); !errors.Is(err, ErrBadPayload) {
			t.Errorf("%s: err = %v, want ErrBadPayload", name, err)
		}
	}
}

func TestMessageDecodesFromTheWireShape(t *testing.T) {
	var m Message
	wire := `{"topic":"orders","partition":2,"offset":17,"key":"k","payload":{"x": 1},"timestamp":1700000000,"receipt_handle":"2:17:5","future_field":true}`
	if err := json.Unmarshal([]byte(wire), &m); err != nil {
		t.Fatal(err)
	}
	want := Message{Topic: "orders", Partition: 2, Offset: 17, Key: "k", Payload: json.RawMessage(`{"x": 1}`),
		Timestamp: 1700000000, ReceiptHandle: "2:17:5"}
	if m.Topic != want.Topic || m.Partition != want.Partition || m.Offset != want.Offset || m.Key != want.Key ||
		string(m.Payload) != string(want.Payload) || m.Timestamp != want.Timestamp || m.ReceiptHandle != want.ReceiptHandle {
		t.Fatalf("got %+v", m)
	}
}

// storedBytes applies the server's §2.8 rule to a batch record as the server decodes it.
// recordWire is rec as the batch produce request carries it (encodeBatchRequest, the encoder
// ProduceBatch uses), without the {"records":[…]} around it.
func recordWire(rec BatchRecord) ([]byte, error) {
	b, err := encodeBatchRequest([]BatchRecord{rec})
	if err != nil {
		return nil, err
	}
	const head, tail = `{"records":[`, `]}`
	if !bytes.HasPrefix(b, []byte(head)) || !bytes.HasSuffix(b, []byte(tail)) {
		return nil, fmt.Errorf("unexpected batch request framing %q", b)
	}
	return b[len(head) : len(b)-len(tail)], nil
}

func storedBytes(t testing.TB, wire []byte) []byte {
	t.Helper()
	var r struct {
		Payload         json.RawMessage `json:"payload"`
		PayloadEncoding string          `json:"payload_encoding"`
	}
	if err := json.Unmarshal(wire, &r); err != nil {
		t.Fatalf("record %s: %v", wire, err)
	}
	if r.PayloadEncoding == "base64" {
		var s string
		if err := json.Unmarshal(r.Payload, &s); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if r.Payload[0] == '"' {
		var s string
		if err := json.Unmarshal(r.Payload, &s); err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	return r.Payload
}

func TestNewBatchRecordStoresExactlyTheGivenBytes(t *testing.T) {
	for _, in := range []string{`{"a":1}`, `[1,2]`, `{ "spaced": true }`, `"quoted"`, "plain text", "<&>", "\x00\xff\xfe", "\u2028", "42"} {
		rec := NewBatchRecord("k", []byte(in))
		wire, err := recordWire(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := storedBytes(t, wire); !bytes.Equal(got, []byte(in)) {
			t.Errorf("%q: stored %q (wire %s)", in, got, wire)
		}
	}
}

func TestNewBase64BatchRecordStoresExactlyTheGivenBytesWithinFourThirds(t *testing.T) {
	for _, in := range []string{"", "\x00\x01\x1f", `{"a":1}`, "plain", "\xff\xfe"} {
		rec := NewBase64BatchRecord("k", []byte(in))
		wire, err := recordWire(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := storedBytes(t, wire); !bytes.Equal(got, []byte(in)) {
			t.Errorf("%q: stored %q (wire %s)", in, got, wire)
		}
		if want := (len(in)+2)/3*4 + 2; len(rec.Payload) != want || rec.PayloadEncoding != EncodingBase64 {
			t.Errorf("%q: payload %d bytes %q, want %d base64", in, len(rec.Payload), rec.PayloadEncoding, want)
		}
	}
}

func FuzzNewBatchRecordRoundTrip(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[]`, "text", "\xff", `"s"`, "{ }", "\u2028<>&"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		wire, err := recordWire(NewBatchRecord("", b))
		if err != nil {
			t.Fatal(err)
		}
		if got := storedBytes(t, wire); !bytes.Equal(got, b) {
			t.Fatalf("stored %q, want %q", got, b)
		}
		if wire, err = recordWire(NewBase64BatchRecord("", b)); err != nil {
			t.Fatal(err)
		}
		if got := storedBytes(t, wire); !bytes.Equal(got, b) {
			t.Fatalf("base64 record stored %q, want %q", got, b)
		}
	})
}

func FuzzMessageBytes(f *testing.F) {
	f.Add([]byte(`{"payload":{"a":1},"timestamp":1}`))
	f.Add([]byte(`{"payload":"text"}`))
	f.Add([]byte(`{"payload":"AAE=","payload_encoding":"base64"}`))
	f.Add([]byte(`{"payload":"%%","payload_encoding":"base64"}`))
	f.Fuzz(func(t *testing.T, wire []byte) {
		var m Message
		if json.Unmarshal(wire, &m) != nil {
			return
		}
		b, err := m.Bytes()
		if err != nil {
			if !errors.Is(err, ErrBadPayload) {
				t.Fatalf("error %v does not wrap ErrBadPayload", err)
			}
			return
		}
		if m.Kind() == PayloadJSON && !bytes.Equal(b, m.Payload) {
			t.Fatalf("JSON payload changed: %q → %q", m.Payload, b)
		}
	})
}
