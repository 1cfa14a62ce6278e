package client

import (
	"bytes"
	"encoding/json"
	"testing"
)

// batchRequest is the generic encoder's view of the batch body: the reference the hand-written
// encoder must match byte for byte.
type batchRequest struct {
	Records []BatchRecord `json:"records"`
}

func genericBatch(t testing.TB, records []BatchRecord) []byte {
	t.Helper()
	b, err := genericBatchOK(records)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// genericBatchOK is genericBatch's encoding, or the generic encoder's refusal.
func genericBatchOK(records []BatchRecord) ([]byte, error) {
	b, err := marshalJSON(batchRequest{Records: records})
	return bytes.TrimRight(b, "\n"), err
}

func TestBatchEncoderMatchesTheGenericEncoder(t *testing.T) {
	p := 2
	records := []BatchRecord{
		NewBatchRecord("", []byte("plain text")),
		NewBatchRecord("k\"1", []byte(`{"a":1,"b":[true,null]}`)),
		NewBatchRecord("", []byte{0xff, 0x00, 'x'}), // base64
		NewBase64BatchRecord("k", []byte("text sent as base64")),
		{Key: "manual", Partition: &p, Payload: []byte("{ \"spaced\" : [ 1 , 2 ] }")},
		{Payload: []byte(`"<html> & unicode é"`)},
	}
	got, err := encodeBatchRequest(records)
	if err != nil {
		t.Fatal(err)
	}
	if want := genericBatch(t, records); !bytes.Equal(got, want) {
		t.Fatalf("hand-written encoder:\n%s\ngeneric encoder:\n%s", got, want)
	}
}

func TestBatchEncoderRefusesInvalidOrMissingPayloads(t *testing.T) {
	for _, r := range []BatchRecord{{Payload: []byte("{not json")}, {Key: "k"}} {
		if _, err := encodeBatchRequest([]BatchRecord{r}); err == nil {
			t.Fatalf("record %+v encoded without error", r)
		}
	}
}

func FuzzBatchEncoderMatchesTheGenericEncoder(f *testing.F) {
	f.Add("", []byte("hello"), []byte(`{"x":1}`))
	f.Add("key", []byte{0xc3, 0x28}, []byte(" [1, 2] "))
	f.Fuzz(func(t *testing.T, key string, raw, manual []byte) {
		records := []BatchRecord{NewBatchRecord(key, raw), NewBase64BatchRecord(key, raw)}
		if isValidJSONValue(manual) {
			records = append(records, BatchRecord{Key: key, Payload: manual})
		}
		got, err := encodeBatchRequest(records)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		want, err := genericBatchOK(records)
		if err != nil {
			// encoding/json refuses some valid JSON payloads the hand-written encoder passes on
			// verbatim (a number literal beyond float64's range): there is no reference then,
			// but the body must still be one valid JSON value.
			if !json.Valid(got) {
				t.Fatalf("hand-written encoder wrote invalid JSON %q (generic encoder: %v)", got, err)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("hand-written encoder:\n%q\ngeneric encoder:\n%q", got, want)
		}
	})
}

// isValidJSONValue reports whether b compacts as one JSON value other than null.
func isValidJSONValue(b []byte) bool {
	var buf bytes.Buffer
	if err := compactInto(&buf, b); err != nil {
		return false
	}
	return len(buf.Bytes()) > 0 && !bytes.Equal(buf.Bytes(), []byte("null"))
}
