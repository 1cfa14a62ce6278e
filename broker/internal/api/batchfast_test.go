package api

import (
	"bytes"
	"testing"
)

var batchFastSeeds = []string{
	`{"records":[{"payload":"x"}]}`,
	` {"records" : [ {"key":"k","partition":2,"payload":"hello"} , {"payload":"AAEC/w==","payload_encoding":"base64"} ] } `,
	`{"records":[{"payload":{"a":1}}]}`,
	`{"records":[{"payload":"a\"b"}]}`,
	`{"Records":[{"payload":"x"}]}`,
	`{"records":[{"payload":"x","payload":"y"}]}`,
	`{"records":[{"partition":01,"payload":"x"}]}`,
	`{"records":[{"partition":1e2,"payload":"x"}]}`,
	`{"records":[{"partition":-1,"payload":"x"}]}`,
	`{"records":[{"payload":""}]}`,
	`{"records":[]}`,
	`{"records":[{"payload":"x"}]}{}`,
	`{"records":[{"payload":"\xff"}]}`,
	`{"records":[{"key":null,"payload":"x"}]}`,
	`{"records":[{"payload":"x","extra":1}]}`,
	`{"records":[{"payload":"QQ","payload_encoding":"base64"}]}`,
}

// FuzzBatchFastPathMatchesStrictDecoder: whenever the fast path accepts a body, the strict
// decoder accepts it too and yields identical records (partition, key, payload bytes).
func FuzzBatchFastPathMatchesStrictDecoder(f *testing.F) {
	for _, s := range batchFastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := parseBatchFast(body)
		if !ok {
			return
		}
		strict, err := decodeBatchStrict(body)
		if err != nil {
			t.Fatalf("fast path accepted what the strict decoder rejects (%v): %q", err, body)
		}
		if len(fast) != len(strict) {
			t.Fatalf("record count %d vs %d for %q", len(fast), len(strict), body)
		}
		for i := range fast {
			a, b := fast[i], strict[i]
			if a.Key != b.Key || a.Partition != b.Partition || !bytes.Equal(a.Payload, b.Payload) {
				t.Fatalf("record %d differs: fast %+v strict %+v for %q", i, a, b, body)
			}
		}
	})
}

// TestBatchFastPathTakesTheCommonShape guards the speed: the bench's shape must not fall back.
func TestBatchFastPathTakesTheCommonShape(t *testing.T) {
	for _, s := range batchFastSeeds[:2] {
		if _, ok := parseBatchFast([]byte(s)); !ok {
			t.Fatalf("fast path refused the common shape %s", s)
		}
	}
}

// FuzzAckBatchFastPathMatchesStrictDecoder: whenever the ack fast path accepts a body, the
// strict decoder accepts it with an identical value.
func FuzzAckBatchFastPathMatchesStrictDecoder(f *testing.F) {
	for _, s := range []string{
		`{"acks":[{"receipt_handle":"0:1:2"},{"receipt_handle":"1:2:3","extend":"true"}]}`,
		` { "acks" : [ { "extend" : "0" , "receipt_handle" : "2:3:4" } ] } `,
		`{"acks":[{"receipt_handle":"0:1:2","extra":1}]}`, `{"ACKS":[]}`, `{"acks":[{"receipt_handle":1}]}`,
		`{"acks":null}`, `{"acks":[]} x`, `{"acks":[{"receipt_handle":"a\u00e9"}]}`, `{"acks":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := parseAckBatchFast(body)
		if !ok {
			return
		}
		var strict ackBatchBody
		if err := decodeStrict(body, &strict); err != nil {
			t.Fatalf("fast path accepted what the strict decoder rejects (%v): %q", err, body)
		}
		if len(fast.Acks) != len(strict.Acks) {
			t.Fatalf("entry count %d vs %d for %q", len(fast.Acks), len(strict.Acks), body)
		}
		for i := range fast.Acks {
			a, b := fast.Acks[i], strict.Acks[i]
			if a.ReceiptHandle != b.ReceiptHandle || (a.Extend == nil) != (b.Extend == nil) ||
				(a.Extend != nil && *a.Extend != *b.Extend) {
				t.Fatalf("entry %d differs for %q", i, body)
			}
		}
	})
}
