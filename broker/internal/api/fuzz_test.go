package api

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"narad.dev/broker/internal/service"
)

// FuzzParseConsumeQuery: any query string either yields a 400 or a result within bounds.
func FuzzParseConsumeQuery(f *testing.F) {
	for _, s := range []string{
		"", "wait=10s", "wait=0", "wait=5", "wait=-3s", "partition=2&offset=0&max_messages=10",
		"partition=-1", "offset=-1", "max_messages=0", "max_messages=1001", "partition=1&partition=2",
		"wait=9223372036854775807ns", "offset=9223372036854775807", "%zz", "wait=1h&max_messages=1",
	} {
		f.Add(s)
	}
	const ceiling = 10 * time.Second
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // the HTTP server hands handlers only what url.ParseQuery accepted
		}
		cq, err := parseConsumeQuery(valuesParams(q, nil), ceiling)
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("%q: error %v maps to %d, want 400", raw, err, statusOf(err))
			}
			return
		}
		if cq.Wait < 0 || cq.Wait > ceiling || cq.Max < 1 || cq.Max > maxConsumeMax ||
			cq.Offset < -1 || (cq.Multi && cq.Max < 2) || (!cq.PartitionGiven && cq.Partition != 0) {
			t.Fatalf("%q: out-of-bounds result %+v", raw, cq)
		}
	})
}

// FuzzBatchBody: any body decodes to a 400/413 or to records that satisfy §2.8's bounds.
func FuzzBatchBody(f *testing.F) {
	for _, s := range []string{
		`{"records":[{"payload":{"a":1}}]}`,
		`{"records":[{"key":"k","partition":2,"payload":"AAEC/w==","payload_encoding":"base64"}]}`,
		`{"records":[{"payload":"text"},{"payload":12.5},{"payload":[1, 2]}]}`,
		`{"records":[{"payload":null}]}`,
		`{"records":[]}`, `{}`, `null`, `[]`, `{"records":[null]}`,
		`{"records":[{"payload":"","payload_encoding":"base64"}]}`,
		`{"records":[{"payload":"\ud800"}]}`,
		`{"records":[{"payload":1}]} {"records":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		recs, err := decodeBatch(body)
		if err != nil {
			if st := statusOf(err); st != 400 && st != 413 {
				t.Fatalf("error %v maps to %d", err, st)
			}
			var re *recordError
			if errors.As(err, &re) && (re.Index < 0 || re.Index >= maxBatchRecords) {
				t.Fatalf("index %d out of range", re.Index)
			}
			return
		}
		if len(recs) < 1 || len(recs) > maxBatchRecords {
			t.Fatalf("%d records accepted", len(recs))
		}
		for i, r := range recs {
			if len(r.Payload) < 1 || len(r.Payload) > maxPayloadBytes || r.Partition < -1 {
				t.Fatalf("record %d out of bounds: partition %d, %d bytes", i, r.Partition, len(r.Payload))
			}
		}
	})
}

// FuzzAckBatchBody: any body is a call-level 400 or 1…1000 entries, each either a 400 or
// a well-formed entry.
func FuzzAckBatchBody(f *testing.F) {
	for _, s := range []string{
		`{"acks":[{"receipt_handle":"0:1:1"}]}`,
		`{"acks":[{"receipt_handle":"0:1:1","extend":"true"},{"receipt_handle":"x","extend":"0"}]}`,
		`{"acks":[]}`, `{"acks":[{}]}`, `{"acks":[{"extend":true}]}`, `{"acks":null}`, `7`,
		`{"acks":[{"receipt_handle":"18446744073709551615:1:1"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		parsed, err := decodeAckBatch(body)
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("error %v maps to %d", err, statusOf(err))
			}
			return
		}
		if len(parsed) < 1 || len(parsed) > maxAckBatch {
			t.Fatalf("%d entries", len(parsed))
		}
		for i, p := range parsed {
			if p.Err != nil {
				if statusOf(p.Err) != 400 {
					t.Fatalf("entry %d: %v maps to %d", i, p.Err, statusOf(p.Err))
				}
				continue
			}
			e := p.Entry
			if e.Partition < 0 || e.Offset < 0 || e.Nonce == 0 || e.Op < service.OpAck || e.Op > service.OpNack {
				t.Fatalf("entry %d malformed: %+v", i, e)
			}
		}
	})
}

// FuzzElectLeadersBody: any body of POST /v1/cluster/elect-leaders is a 400 or a request
// within bounds (a partition only with a valid topic).
func FuzzElectLeadersBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"preferred":true}`, `{"topic":"orders","partition":0}`, `{"partition":3}`,
		`{"topic":"orders","partition":-1}`, `{"topic":"orders","partition":2147483648}`, `{"topic":""}`,
		`{"topic":"a/b"}`, `null`, `[]`, `{"preferred":1}`, `{} {}`, `{"x":1}`, `{"partition":1e3,"topic":"t"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := parseElectLeaders(b)
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("%q: error %v maps to %d, want 400", b, err, statusOf(err))
			}
			return
		}
		if req.Topic != "" && !validTopicName(req.Topic) || req.Partition < -1 || req.Partition >= 0 && req.Topic == "" {
			t.Fatalf("%q: out-of-bounds request %+v", b, req)
		}
	})
}
