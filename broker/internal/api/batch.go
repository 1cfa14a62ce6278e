package api

import (
	"encoding/base64"
	"encoding/json"

	"narad.dev/broker/internal/service"
)

// batchBody is the envelope of a batch produce. Records stay raw so that each one is
// decoded on its own and a bad record can be named by index.
type batchBody struct {
	Records []json.RawMessage `json:"records"`
}

// batchRecord is one record of a batch produce (docs/internals/http-api.md §2.8). Payload stays raw: a non-string
// payload is stored exactly as its JSON text appears in the request.
type batchRecord struct {
	Key             json.RawMessage `json:"key"`
	Partition       *int            `json:"partition"`
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding *string         `json:"payload_encoding"`
}

// decodeBatch decodes and checks a batch produce body without looking at the topic: the
// envelope (400), 1…4096 records (400), then each record in array order (400, or 413 for
// a decoded payload over 1 MiB), reporting the first failing record's index. Every
// returned record has Partition -1 (not pinned) or ≥ 0 and a payload of 1…1 MiB.
func decodeBatch(body []byte) ([]service.ProduceRecord, error) {
	if recs, ok := parseBatchFast(body); ok {
		return recs, nil
	}
	return decodeBatchStrict(body)
}

// decodeBatchStrict is the general decoder: every rule of docs/internals/http-api.md §2.8 with the exact error.
func decodeBatchStrict(body []byte) ([]service.ProduceRecord, error) {
	var env batchBody
	if err := decodeStrict(body, &env); err != nil {
		return nil, err
	}
	if len(env.Records) == 0 {
		return nil, invalidf("records must hold 1…%d records", maxBatchRecords)
	}
	if len(env.Records) > maxBatchRecords {
		return nil, invalidf("too many records: %d > %d", len(env.Records), maxBatchRecords)
	}
	recs := make([]service.ProduceRecord, len(env.Records))
	for i, raw := range env.Records {
		rec, err := decodeBatchRecord(raw)
		if err != nil {
			return nil, &recordError{Index: i, Err: err}
		}
		recs[i] = rec
	}
	return recs, nil
}

// decodeBatchRecord decodes one record and derives its message bytes (docs/internals/http-api.md §2.8): with
// payload_encoding "base64", the decoded bytes of a standard padded base64 string; else for
// a JSON string, its UTF-8 content; else the payload's JSON text exactly as sent.
func decodeBatchRecord(raw json.RawMessage) (service.ProduceRecord, error) {
	var br batchRecord
	if err := decodeStrict(raw, &br); err != nil {
		return service.ProduceRecord{}, err
	}
	rec := service.ProduceRecord{Partition: -1}
	if !isAbsentJSON(br.Key) {
		if br.Key[0] != '"' || !rawJSONStringIsExact(br.Key) {
			return service.ProduceRecord{}, &fieldError{Field: "key",
				msg: "key must be a JSON string of valid UTF-8 (no lone surrogate escapes)"}
		}
		if err := json.Unmarshal(br.Key, &rec.Key); err != nil {
			return service.ProduceRecord{}, invalidf("invalid key string: %v", err)
		}
		if err := checkKey(rec.Key); err != nil {
			return service.ProduceRecord{}, err
		}
	}
	if br.Partition != nil {
		if *br.Partition < 0 {
			return service.ProduceRecord{}, invalidf("partition must not be negative")
		}
		rec.Partition = *br.Partition
	}
	if isAbsentJSON(br.Payload) {
		return service.ProduceRecord{}, invalidf("payload is required and must not be null")
	}
	switch {
	case br.PayloadEncoding != nil:
		if *br.PayloadEncoding != "base64" {
			return service.ProduceRecord{}, invalidf("payload_encoding must be \"base64\" when given, not %q", *br.PayloadEncoding)
		}
		var s string
		if err := json.Unmarshal(br.Payload, &s); err != nil {
			return service.ProduceRecord{}, invalidf("a base64 payload must be a JSON string")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return service.ProduceRecord{}, invalidf("payload is not standard padded base64: %v", err)
		}
		rec.Payload = b
	case br.Payload[0] == '"':
		var s string
		if err := json.Unmarshal(br.Payload, &s); err != nil {
			return service.ProduceRecord{}, invalidf("invalid payload string: %v", err)
		}
		rec.Payload = []byte(s)
	default:
		rec.Payload = br.Payload
	}
	if len(rec.Payload) == 0 {
		return service.ProduceRecord{}, invalidf("payload must not be empty")
	}
	if len(rec.Payload) > maxPayloadBytes {
		return service.ProduceRecord{}, tooLargef("payload is %d bytes, over the %d byte limit", len(rec.Payload), maxPayloadBytes)
	}
	return rec, nil
}
