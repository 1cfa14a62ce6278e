package httpload

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// errForeign marks a consumed message that is not this run's (another run's tag or no tag).
var errForeign = errors.New("httpload: message of another run")

// tagged is the payload: a JSON object with the run tag, the sequence and padding up to the
// configured size. Valid JSON comes back from consume embedded as is (docs/consuming.md).
type tagged struct {
	Run string `json:"run"`
	Seq int64  `json:"seq"`
	Pad string `json:"pad"`
}

// payload returns the bytes of message seq, exactly size bytes long.
func payload(run string, seq int64, size int) []byte {
	head := fmt.Sprintf(`{"run":%q,"seq":%d,"pad":"`, run, seq)
	pad := max(size-len(head)-2, 0)
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}

// parsePayload returns the sequence of a consumed payload of run; errForeign when the payload
// belongs to something else.
func parsePayload(run string, raw json.RawMessage) (int64, error) {
	var t tagged
	if err := json.Unmarshal(raw, &t); err != nil || t.Run != run {
		return 0, errForeign
	}
	return t.Seq, nil
}
