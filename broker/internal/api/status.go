package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"narad.dev/broker/internal/errcode"
)

// errAuthUnavailable is returned when security is on but no Authenticator is configured.
var errAuthUnavailable = errors.New("authentication unavailable")

// statusOf maps an error to its HTTP status: errcode's table (errcode.HTTPStatus) is the only
// place that does; anything it does not know is a 500.
func statusOf(err error) int { return errcode.HTTPStatus(err) }

// reqError is a client error found by the HTTP layer itself: its message is the whole
// text shown to the client, and it unwraps to the sentinel that fixes its status.
type reqError struct {
	sentinel error
	msg      string
}

func (e *reqError) Error() string { return e.msg }
func (e *reqError) Unwrap() error { return e.sentinel }

// invalidf is a 400.
func invalidf(format string, args ...any) error {
	return &reqError{sentinel: ErrInvalid, msg: fmt.Sprintf(format, args...)}
}

// forbiddenf is a 403.
func forbiddenf(format string, args ...any) error {
	return &reqError{sentinel: ErrForbidden, msg: fmt.Sprintf(format, args...)}
}

// notFoundf is a 404.
func notFoundf(format string, args ...any) error {
	return &reqError{sentinel: ErrNotFound, msg: fmt.Sprintf(format, args...)}
}

// conflictf is a 409.
func conflictf(format string, args ...any) error {
	return &reqError{sentinel: ErrConflict, msg: fmt.Sprintf(format, args...)}
}

// tooLargef is a 413.
func tooLargef(format string, args ...any) error {
	return &reqError{sentinel: ErrTooLarge, msg: fmt.Sprintf(format, args...)}
}

// recordError blames one record of a batch produce; the error body carries its index
// (docs/internals/http-api.md §2.8).
type recordError struct {
	Index int
	Err   error
}

func (e *recordError) Error() string { return fmt.Sprintf("record %d: %v", e.Index, e.Err) }
func (e *recordError) Unwrap() error { return e.Err }

// ErrorFields adds "index" to the error body, plus the fields of the record's own error.
func (e *recordError) ErrorFields() map[string]any {
	fields := map[string]any{}
	var fe errorFielder
	if errors.As(e.Err, &fe) {
		for k, v := range fe.ErrorFields() {
			fields[k] = v
		}
	}
	fields["index"] = e.Index
	return fields
}

// errorFielder is an error that adds machine-readable fields to the error body
// (docs/internals/http-api.md §1.5: index, owner/target, node/reasons).
type errorFielder interface {
	ErrorFields() map[string]any
}

// writeErr answers err with its status (statusOf). A 500 shows only "<op> failed" and logs
// the cause; every other status shows err's message plus any ErrorFields.
func (s *server) writeErr(w http.ResponseWriter, r *http.Request, op string, err error) {
	status := statusOf(err)
	if status == http.StatusInternalServerError {
		msg := op + " failed"
		if op == opAuthenticate {
			msg = "authentication unavailable"
		}
		s.log.Error(msg, "op", op, "method", logValue(r.Method), "path", logValue(r.URL.Path), "err", err)
		writeErrorBody(w, status, msg, nil)
		return
	}
	msg := err.Error()
	switch status {
	case http.StatusUnauthorized:
		msg = "authentication required" // unknown user and wrong password look the same (§1.2)
	case http.StatusTooManyRequests:
		msg = "too many failed authentication attempts"
	}
	if errors.Is(err, ErrBusy) {
		w.Header().Set("Retry-After", retryAfterBusySeconds)
	}
	if errors.Is(err, errcode.ErrNotEnoughReplicas) {
		// docs/replication.md: the body names the condition, a client retries after a moment.
		msg = "not_enough_replicas"
		w.Header().Set("Retry-After", "1")
	}
	var fields map[string]any
	var fe errorFielder
	if errors.As(err, &fe) {
		fields = fe.ErrorFields()
	}
	writeErrorBody(w, status, msg, fields)
}

// opAuthenticate is the op name of credential checks; its 500 text is fixed by docs/internals/http-api.md §1.2.
const opAuthenticate = "authentication"

// writeErrorBody writes {"error": msg, ...fields} with the headers the status requires:
// WWW-Authenticate on 401, Retry-After on 429 (docs/internals/http-api.md §1.2).
func writeErrorBody(w http.ResponseWriter, status int, msg string, fields map[string]any) {
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Basic realm="narad"`)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "12")
	}
	body := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		body[k] = v
	}
	body["error"] = msg
	writeJSON(w, status, body)
}

// writeJSON writes v as one JSON value followed by "\n" (docs/internals/http-api.md §1.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only response types of this package reach here; they always marshal.
		b = []byte(`{"error":"encoding response failed"}`)
		status = http.StatusInternalServerError
	}
	writeRawJSON(w, status, append(b, '\n'))
}

// writeRawJSON writes an already-encoded JSON body (ending in "\n"). Every answer carries a
// Content-Length, so a large body (a batch consume) goes out in one piece rather than
// chunked, and the client can size its read buffer once. Below selfLengthBytes net/http
// counts the body itself (it holds the whole answer until the handler returns), so setting
// the header there would only cost two allocations per request.
func writeRawJSON(w http.ResponseWriter, status int, body []byte) error {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if len(body) >= selfLengthBytes {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// selfLengthBytes is the body size up to which net/http's server buffers a whole answer
// and sets its Content-Length itself (its chunking buffer is 2,048 bytes; kept below it).
// TestJSONAnswersCarryContentLength holds net/http to it.
const selfLengthBytes = 2000

// jsonContentType is shared by every JSON answer (the header map holds it read-only).
var jsonContentType = []string{"application/json"}

// writeEmpty answers status (202/204) with an empty body.
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}
