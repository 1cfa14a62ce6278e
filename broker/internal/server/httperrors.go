package server

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// maxHTTPHeaderBytes bounds the request line plus headers of a client API request (net/http
// reads up to 4 KiB more before it refuses); larger is answered 431 (docs/operating.md,
// Limits).
const maxHTTPHeaderBytes = 1 << 20

// jsonErrorsListener makes net/http's own error answers JSON. net/http answers some
// requests before any handler runs, writing a fixed text/plain response straight to the
// connection: 431 for header fields over MaxHeaderBytes, 400 for a malformed request, 501
// for an unsupported transfer encoding. jsonErrorsListener's connections recognise exactly
// that response shape in one Write and send {"error": "..."} with the same status instead,
// so every client API error is JSON. Over HTTPS these writes are encrypted below this
// wrapper and are not rewritten.
type jsonErrorsListener struct{ net.Listener }

func (l jsonErrorsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return jsonErrorsConn{c}, nil
}

type jsonErrorsConn struct{ net.Conn }

// netHTTPErrorHeaders is the header block net/http writes with its connection-level errors
// (its errorHeaders); a handler's response always carries a Date header, so it never matches.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c jsonErrorsConn) Write(p []byte) (int, error) {
	if rewritten, ok := jsonConnError(p); ok {
		if _, err := c.Conn.Write(rewritten); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// jsonConnError turns one of net/http's connection-level error answers
// ("HTTP/1.1 <code> <text>" + netHTTPErrorHeaders + "<code> <text>[: detail]") into the same
// status with a JSON body; ok is false for anything else.
func jsonConnError(p []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(proto)) {
		return nil, false
	}
	i := bytes.Index(p, []byte(netHTTPErrorHeaders))
	if i < 0 {
		return nil, false
	}
	statusLine, body := string(p[len(proto):i]), string(p[i+len(netHTTPErrorHeaders):])
	code, text, found := strings.Cut(statusLine, " ")
	if !found || len(code) != 3 || !strings.HasPrefix(body, statusLine) || strings.ContainsAny(statusLine, "\r\n") {
		return nil, false
	}
	n, err := strconv.Atoi(code)
	if err != nil || n < 400 || n > 599 {
		return nil, false
	}
	if text == "" {
		text = http.StatusText(n) // a status line without its text still gets a message
	}
	if text == "" {
		text = "error"
	}
	msg := strings.ToLower(text)
	if detail, ok := strings.CutPrefix(body[len(statusLine):], ": "); ok && detail != "" {
		msg += ": " + detail
	}
	if code == "431" {
		msg += " (request line and headers are limited to " + strconv.Itoa(maxHTTPHeaderBytes) + " bytes)"
	}
	js, err := json.Marshal(map[string]string{"error": msg})
	if err != nil {
		return nil, false
	}
	js = append(js, '\n')
	out := make([]byte, 0, 128+len(js))
	out = append(out, proto+statusLine+"\r\nContent-Type: application/json\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(js)), 10)
	out = append(out, "\r\nConnection: close\r\n\r\n"...)
	return append(out, js...), true
}

// writeJSON writes v as one JSON value and a newline (the pprof port's answers).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes the §1.5 error body {"error": msg} plus fields.
func writeError(w http.ResponseWriter, status int, msg string, fields map[string]any) {
	body := map[string]any{"error": msg}
	for k, v := range fields {
		body[k] = v
	}
	writeJSON(w, status, body)
}
