package client

import (
	stdjson "encoding/json"

	json "github.com/goccy/go-json"
)

// unmarshal decodes a response body into v with goccy/go-json, which is faster than
// encoding/json but has panicked on malformed input, and once it has, can leave its pooled
// decoder state broken for the calls after it (a bug of its v0.10 releases, fixed in v0.12).
// A body is therefore checked by encoding/json's scanner first, and a malformed one gets
// encoding/json's error and never reaches goccy: whatever a server or a proxy in between
// answers, the client returns an error, not a panic or a wrong value.
func unmarshal(body []byte, v any) error {
	if !stdjson.Valid(body) {
		return stdjson.Unmarshal(body, v)
	}
	return json.Unmarshal(body, v)
}
