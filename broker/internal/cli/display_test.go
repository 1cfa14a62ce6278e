package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"narad.dev/broker/client"
)

func TestMessageDisplayFormatsSecondsHeaderAndPayloadKinds(t *testing.T) {
	// 1700000000 s = 2023-11-14 22:13:20 UTC; a millisecond reading would land in 1970.
	const ts = 1700000000
	cases := []struct {
		name string
		m    client.Message
		raw  bool
		want string
	}{
		{"json verbatim", client.Message{Partition: 2, Offset: 41, Key: "cust-7", Payload: json.RawMessage(`{"a": [1, 2]}`), Timestamp: ts},
			false, "[p2 @41] key=cust-7 22:13:20.000\n{\"a\": [1, 2]}\n"},
		{"text unquoted, keyless", client.Message{Partition: 0, Offset: 0, Payload: json.RawMessage(`"hello \"world\""`), Timestamp: ts},
			false, "[p0 @0] 22:13:20.000\nhello \"world\"\n"},
		{"binary as hex with byte count", client.Message{Partition: 1, Offset: 9, Key: "k", Payload: json.RawMessage(`"AAEC/w=="`), PayloadEncoding: "base64", Timestamp: ts},
			false, "[p1 @9] key=k 22:13:20.000\n<binary 4 bytes> 000102ff\n"},
		{"raw prints decoded bytes only", client.Message{Payload: json.RawMessage(`"AAEC/w=="`), PayloadEncoding: "base64", Timestamp: ts},
			true, "\x00\x01\x02\xff\n"},
		{"raw text", client.Message{Payload: json.RawMessage(`"plain"`), Timestamp: ts}, true, "plain\n"},
		{"raw json", client.Message{Payload: json.RawMessage(`{"x":1}`), Timestamp: ts}, true, "{\"x\":1}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeMessage(&b, tc.m, tc.raw, false, time.UTC); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func TestMessageHeaderIsDimOnATerminal(t *testing.T) {
	var b bytes.Buffer
	m := client.Message{Partition: 3, Offset: 5, Payload: json.RawMessage(`1`), Timestamp: 0}
	if err := writeMessage(&b, m, false, true, time.UTC); err != nil {
		t.Fatal(err)
	}
	if want := ansiDim + "[p3 @5] 00:00:00.000" + ansiReset + "\n1\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

func TestMessageHeaderUsesTheDisplayTimeZone(t *testing.T) {
	loc := time.FixedZone("X", 2*3600+30*60)
	m := client.Message{Timestamp: 1700000000}
	if got := messageHeader(m, loc); got != "[p0 @0] 00:43:20.000" {
		t.Fatalf("header = %q", got)
	}
}
