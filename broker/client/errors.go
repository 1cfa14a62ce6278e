package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxErrorBody bounds how much of an error response is read and kept.
const maxErrorBody = 64 << 10

// Error is an HTTP error response (any status outside 2xx) of the Narad API. Status is always
// set; Message is the body's "error" field (or, for a body without one, a short text derived
// from the body or the status). The other fields are the machine-readable additions of
// docs/internals/http-api.md §1.5 and are zero when the body did not carry them.
type Error struct {
	Status  int      // HTTP status code
	Message string   // the "error" field
	Index   *int     // batch produce: first failing record (§2.8)
	Node    string   // decommission refusal: the node (§2.17)
	Reasons []string // decommission refusal: reason codes (§2.16)
	Owner   string   // move abort: the partition's owner (§2.19)
	Target  string   // move abort: the current move target, "" when none (§2.19)
	Reason  string   // remote attach refusal (422): the failed target check (§2.12)
	// Field names the offending request field of a 400 (a topic limit, "key").
	Field string
	// Children lists the children of a parent whose delete was refused (409) because
	// DetachChildren was not set.
	Children []string
	// Missing: a forced decommission refused (409) because its lose list left out these
	// single-replica partitions of the dead node (§2.17).
	Missing []PartitionRef
}

// Error renders "http <status>: <message>".
func (e *Error) Error() string {
	return fmt.Sprintf("http %d: %s", e.Status, e.Message)
}

// Retryable reports whether the status is one docs/internals/http-api.md §1.6 says to retry with back-off
// (503, 500, and 429 after back-off). A retried produce may duplicate.
func (e *Error) Retryable() bool {
	return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusInternalServerError ||
		e.Status == http.StatusTooManyRequests
}

// IsStatus reports whether err is (or wraps) an *Error with the given HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// errorBody is the JSON shape of every 4xx/5xx body (§1.5). Status is read too because
// /healthz answers 503 with {"status": "shutting down"}.
type errorBody struct {
	Error    *string        `json:"error"`
	Status   string         `json:"status"`
	Index    *int           `json:"index"`
	Node     string         `json:"node"`
	Reasons  []string       `json:"reasons"`
	Owner    string         `json:"owner"`
	Target   string         `json:"target"`
	Reason   string         `json:"reason"`
	Field    string         `json:"field"`
	Children []string       `json:"children"`
	Missing  []PartitionRef `json:"missing"`
}

// decodeError builds the *Error for a non-2xx response with the given (possibly truncated)
// body. It never fails: a body that is not the documented JSON still yields an Error whose
// Message is the trimmed body text or the status text.
func decodeError(status int, body []byte) *Error {
	e := &Error{Status: status}
	var b errorBody
	if err := json.Unmarshal(body, &b); err == nil {
		e.Index, e.Node, e.Reasons, e.Owner, e.Target, e.Reason = b.Index, b.Node, b.Reasons, b.Owner, b.Target, b.Reason
		e.Field, e.Children, e.Missing = b.Field, b.Children, b.Missing
		switch {
		case b.Error != nil:
			e.Message = *b.Error
		case b.Status != "":
			e.Message = b.Status
		}
	} else if text := strings.TrimSpace(string(body)); text != "" && utf8.ValidString(text) {
		if r := []rune(text); len(r) > 200 {
			text = string(r[:200]) + "…"
		}
		e.Message = text
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(status))
		if e.Message == "" {
			e.Message = "unexpected status"
		}
	}
	return e
}
