package httpfast

import (
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// maxHeld is the most body bytes held back before the head is written: an answer that
// declares no Content-Length and grows past it is sent chunked, as net/http does.
const maxHeld = 64 << 10

// keepOut bounds the body buffer a connection keeps between requests.
const keepOut = 64 << 10

var errAfterHandler = errors.New("httpfast: response written after its handler returned")

// response is the fast path's http.ResponseWriter: the answer is held until the handler
// returns, then written with its Content-Length in one go; an answer that declares its
// Content-Length, or outgrows maxHeld, streams.
type response struct {
	c      *conn
	header http.Header

	status   int
	sent     bool  // the head is in the write buffer
	chunked  bool  // the body goes in chunks
	declared int64 // the Content-Length the head carries when sent and not chunked
	n        int64 // body bytes written after the head
	done     bool
	short    bool  // fewer bytes than declared: the connection must close
	err      error // a write to the connection failed
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.done || w.status != 0 || code < 200 {
		return // a second status is ignored; informational ones are not sent
	}
	if code > 999 {
		panic("httpfast: invalid WriteHeader code " + strconv.Itoa(code))
	}
	w.status = code
}

func (w *response) bodyAllowed() bool {
	return w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if w.done {
		return 0, errAfterHandler
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if w.sent {
		return w.writeBody(p)
	}
	if n, ok := declaredLength(w.header); ok {
		w.sendHead(n, false, p, false)
		return w.writeBody(p)
	}
	c := w.c
	if len(c.out)+len(p) <= maxHeld {
		c.out = append(c.out, p...)
		return len(p), nil
	}
	w.sendHead(-1, true, c.out, false)
	if _, err := w.writeBody(c.out); err != nil {
		return 0, err
	}
	c.out = c.out[:0]
	return w.writeBody(p)
}

// writeBody writes p after the head: within the declared length, or as one chunk.
func (w *response) writeBody(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	bw := w.c.bw
	var err error
	switch {
	case w.chunked:
		_, _ = bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, err = bw.WriteString("\r\n")
	case w.n+int64(len(p)) > w.declared:
		room := w.declared - w.n
		if room > 0 {
			_, err = bw.Write(p[:room])
			w.n += room
		}
		if err == nil {
			err = http.ErrContentLength
		}
		return int(max(room, 0)), err
	default:
		_, err = bw.Write(p)
	}
	if err != nil {
		w.err = err
		return 0, err
	}
	w.n += int64(len(p))
	return len(p), nil
}

// finish completes the answer once the handler returned; closing adds Connection: close.
func (w *response) finish(closing bool) {
	if w.done {
		return
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	c := w.c
	switch {
	case !w.sent:
		n := int64(len(c.out))
		if !w.bodyAllowed() {
			n = -1
		}
		w.sendHead(n, false, c.out, closing)
		_, _ = w.writeBody(c.out)
	case w.chunked:
		_, _ = c.bw.WriteString("0\r\n\r\n")
	case w.n < w.declared:
		w.short = true
	}
	if cap(c.out) > keepOut {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	w.done = true
}

// sendHead writes the status line and fields: the handler's (values with CR or LF
// get spaces instead, names that are not tokens are dropped, as net/http does), then Date,
// a sniffed Content-Type, Content-Length (length ≥ 0) or chunked framing, and
// Connection: close when closing.
func (w *response) sendHead(length int64, chunked bool, sniff []byte, closing bool) {
	c := w.c
	bw := c.bw
	w.sent, w.chunked, w.declared = true, chunked, length
	_, _ = bw.WriteString(statusLine(w.status))
	keys := c.keys[:0]
	for k := range w.header {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range w.header[k] {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			writeFieldValue(bw, v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	c.keys = keys[:0]
	if _, ok := w.header["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.WriteString(httpDate(time.Now()))
		_, _ = bw.WriteString("\r\n")
	}
	if _, ok := w.header["Content-Type"]; !ok && len(sniff) > 0 && w.bodyAllowed() {
		_, _ = bw.WriteString("Content-Type: ")
		_, _ = bw.WriteString(http.DetectContentType(sniff))
		_, _ = bw.WriteString("\r\n")
	}
	switch {
	case chunked:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	case length >= 0:
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.WriteString(strconv.FormatInt(length, 10))
		_, _ = bw.WriteString("\r\n")
	}
	if closing {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

// declaredLength is the handler's Content-Length, when it set a valid one.
func declaredLength(h http.Header) (int64, bool) {
	v := h["Content-Length"]
	if len(v) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	return n, err == nil && n >= 0
}

type fieldWriter interface {
	WriteString(string) (int, error)
	WriteByte(byte) error
}

// writeFieldValue writes v with each CR and LF replaced by a space, so no value can end
// the field early.
func writeFieldValue(bw fieldWriter, v string) {
	if !strings.ContainsAny(v, "\r\n") {
		_, _ = bw.WriteString(v)
		return
	}
	for i := 0; i < len(v); i++ {
		b := v[i]
		if b == '\r' || b == '\n' {
			b = ' '
		}
		_ = bw.WriteByte(b)
	}
}

// statusLines holds "HTTP/1.1 <code> <text>\r\n" for the codes net/http names.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + t + "\r\n"
		}
	}
	return m
}()

func statusLine(code int) string {
	if s, ok := statusLines[code]; ok {
		return s
	}
	return "HTTP/1.1 " + strconv.Itoa(code) + " status code " + strconv.Itoa(code) + "\r\n"
}

// dateStamp is the Date field's value for one second.
type dateStamp struct {
	unix int64
	text string
}

var lastDate atomic.Pointer[dateStamp]

// httpDate formats t as the Date field wants it, once per second.
func httpDate(t time.Time) string {
	u := t.Unix()
	if d := lastDate.Load(); d != nil && d.unix == u {
		return d.text
	}
	d := &dateStamp{unix: u, text: t.UTC().Format(http.TimeFormat)}
	lastDate.Store(d)
	return d.text
}
