package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// Body limits (docs/internals/http-api.md §1.7).
const (
	maxJSONBody     = 1 << 20 // JSON request bodies; 413 above
	maxPayloadBytes = 1 << 20 // one produced message; 413 above, 0 → 400
	maxBatchBody    = 8 << 20 // batch produce body; 413 above
	maxBatchRecords = 4096
	maxAckBatch     = 1000
)

// readBody reads the whole request body, refusing more than limit bytes with a 413. It
// reads at most limit+1 bytes, so an oversized body costs no more than the limit.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLargef("request body over %d bytes", limit)
	}
	if r.ContentLength > 0 {
		// Known length (the server's body reader enforces it): read it with one allocation.
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, invalidf("reading request body: %v", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLargef("request body over %d bytes", mbe.Limit)
		}
		return nil, invalidf("reading request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, tooLargef("request body over %d bytes", limit)
	}
	return b, nil
}

// readJSON reads a JSON request body of at most maxJSONBody bytes into v (decodeStrict).
func readJSON(r *http.Request, v any) error {
	b, err := readBody(r, maxJSONBody)
	if err != nil {
		return err
	}
	return decodeStrict(b, v)
}

// decodeStrict decodes exactly one JSON value from b into v: unknown fields, wrong types,
// malformed JSON and trailing values are all 400 "invalid json: ..." (docs/internals/http-api.md §1.4).
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return invalidf("invalid json: empty body")
		}
		return invalidf("invalid json: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("invalid json: more than one value in body")
	}
	return nil
}

// isAbsentJSON reports whether a json.RawMessage field was left out or set to null.
func isAbsentJSON(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}
