package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// errEmptyPayload is returned for a batch record without a payload (null is not a payload).
var errEmptyPayload = errors.New("batch record without a payload")

// encodeBatchRequest encodes {"records":[...]} by hand: payloads built by NewBatchRecord are
// known to be compact and are copied as they are; any other payload is compacted (and so
// validated) with encoding/json's Compact (goccy's Compact mishandles a non-empty dst). The bytes equal what the generic encoder produces (minus its
// trailing newline); the generic encoder re-scans every payload, which made it the load
// generator's largest cost at batch 100.
func encodeBatchRequest(records []BatchRecord) ([]byte, error) {
	size := 16
	for i := range records {
		size += len(records[i].Payload) + len(records[i].Key) + 48
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteString(`{"records":[`)
	for i := range records {
		r := &records[i]
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('{')
		if r.Key != "" {
			buf.WriteString(`"key":`)
			k, err := marshalString(r.Key)
			if err != nil {
				return nil, err
			}
			buf.Write(k)
			buf.WriteByte(',')
		}
		if r.Partition != nil {
			buf.WriteString(`"partition":`)
			buf.WriteString(strconv.Itoa(*r.Partition))
			buf.WriteByte(',')
		}
		buf.WriteString(`"payload":`)
		switch {
		case len(r.Payload) == 0:
			return nil, errEmptyPayload
		case r.compact:
			buf.Write(r.Payload)
		default:
			if err := json.Compact(buf, r.Payload); err != nil {
				return nil, err
			}
		}
		if r.PayloadEncoding != "" {
			buf.WriteString(`,"payload_encoding":`)
			e, err := marshalString(r.PayloadEncoding)
			if err != nil {
				return nil, err
			}
			buf.Write(e)
		}
		buf.WriteByte('}')
	}
	buf.WriteString(`]}`)
	return buf.Bytes(), nil
}

// compactInto is json.Compact, for tests.
func compactInto(dst *bytes.Buffer, src []byte) error { return json.Compact(dst, src) }
