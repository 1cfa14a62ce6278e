package httpfast

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// lingerDelay is how long a connection closed with request bytes unread waits after its
// last answer and a half-close before it closes (net/http waits as long): closing at once
// would reset the connection, and a client still sending could lose the answer.
const lingerDelay = 500 * time.Millisecond

// bufSize is each connection's read and write buffer, as net/http's. A head that does not
// fit the read buffer goes to net/http, which takes heads up to its MaxHeaderBytes.
const bufSize = 4 << 10

// conn is one client connection while the fast path serves it.
type conn struct {
	s      *Server
	rwc    net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	remote string
	header http.Header // the request's fields, cleared for each request
	answer http.Header // the response's fields, cleared for each request
	out    []byte      // the response body held until the handler returns
	keys   []string    // scratch for writing the response fields in order
	idle   atomic.Bool // waiting for the first byte of a request

	watching bool       // a watcher reads the next request's first byte
	watched  chan error // its outcome
}

func newConn(s *Server, rwc net.Conn) *conn {
	return &conn{
		s:       s,
		rwc:     rwc,
		br:      bufio.NewReaderSize(rwc, bufSize),
		bw:      bufio.NewWriterSize(rwc, bufSize),
		remote:  rwc.RemoteAddr().String(),
		header:  make(http.Header, 8),
		answer:  make(http.Header, 4),
		watched: make(chan error, 1),
	}
}

// deadline is t + d, or no deadline when d is not positive.
func deadline(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return t.Add(d)
}

// serve runs the connection's requests until it closes or is handed to net/http.
func (c *conn) serve() {
	handed := false
	defer func() {
		if v := recover(); v != nil {
			c.s.Logger.Error("http connection panic", "remote", c.remote, "panic", v, "stack", string(debug.Stack()))
		}
		c.s.forget(c)
		if !handed {
			_ = c.rwc.Close()
		}
	}()
	std := c.s.Std
	headerTimeout := std.ReadHeaderTimeout
	if headerTimeout <= 0 {
		headerTimeout = std.ReadTimeout
	}
	idleTimeout := std.IdleTimeout
	if idleTimeout <= 0 {
		idleTimeout = std.ReadTimeout
	}
	_ = c.rwc.SetReadDeadline(deadline(time.Now(), headerTimeout))
	for {
		c.idle.Store(true)
		if c.s.closing.Load() {
			return
		}
		var err error
		if c.watching {
			err = <-c.watched
			c.watching = false
		} else {
			_, err = c.br.Peek(1)
		}
		c.idle.Store(false)
		if err != nil {
			return
		}
		t0 := time.Now()
		end := headEnd(c.buffered())
		if end < 0 {
			_ = c.rwc.SetReadDeadline(deadline(t0, headerTimeout))
			for end < 0 {
				if c.br.Buffered() == bufSize {
					handed = true
					c.handOff()
					return
				}
				if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
					return // the head timed out or the client left mid-head: net/http answers neither
				}
				end = headEnd(c.buffered())
			}
		}
		clear(c.header)
		hd, ok := parseHead(c.buffered()[:end], c.header)
		watch := false
		if ok {
			ok, watch = c.s.Route(hd.method, hd.path, hd.rawQuery)
		}
		if !ok {
			handed = true
			c.handOff()
			return
		}
		_, _ = c.br.Discard(end)
		if !c.serveRequest(&hd, watch && hd.length == 0, t0) {
			return
		}
		// The idle bound; a watcher's read, when one runs, is that wait and gets it too.
		_ = c.rwc.SetReadDeadline(deadline(time.Now(), idleTimeout))
	}
}

// buffered is what the read buffer holds.
func (c *conn) buffered() []byte {
	b, _ := c.br.Peek(c.br.Buffered())
	return b
}

// serveRequest serves the request of head hd; false closes the connection.
func (c *conn) serveRequest(hd *head, watch bool, t0 time.Time) bool {
	std := c.s.Std
	_ = c.rwc.SetWriteDeadline(deadline(t0, std.WriteTimeout))
	var b *body
	if hd.length > 0 {
		b = &body{c: c, n: hd.length}
		if int64(c.br.Buffered()) < hd.length {
			_ = c.rwc.SetReadDeadline(deadline(t0, std.ReadTimeout))
		}
	}
	ctx, cancel := context.WithCancel(c.s.base)
	defer cancel() // net/http too cancels a request's context when its handler returns
	r0 := http.Request{
		Method:        hd.method,
		URL:           &url.URL{Path: hd.path, RawQuery: hd.rawQuery},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        c.header,
		Body:          http.NoBody,
		ContentLength: hd.length,
		Close:         hd.close,
		Host:          hd.host,
		RemoteAddr:    c.remote,
		RequestURI:    hd.target,
	}
	if b != nil {
		r0.Body = b
	}
	r := r0.WithContext(ctx)
	if watch {
		c.watch(cancel)
	}
	clear(c.answer)
	w := &response{c: c, header: c.answer}
	if !c.run(w, r) {
		return false
	}
	leftover := b != nil && b.n > 0
	if leftover && b.n <= int64(c.br.Buffered()) {
		_, _ = c.br.Discard(int(b.n))
		leftover = false
	}
	if b != nil {
		b.c = nil // reads after the handler returned fail
	}
	keep := !hd.close && !leftover && !c.s.closing.Load()
	w.finish(!keep)
	if err := c.bw.Flush(); err != nil || w.err != nil || w.short {
		return false
	}
	if leftover {
		if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		time.Sleep(lingerDelay)
	}
	return keep
}

// run calls the handler; false when it panicked (the connection then closes without an
// answer, as net/http does: http.ErrAbortHandler is the quiet way to ask for that).
func (c *conn) run(w *response, r *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			w.done = true
			if v != http.ErrAbortHandler {
				c.s.Logger.Error("http handler panic", "remote", c.remote, "panic", v, "stack", string(debug.Stack()))
			}
			ok = false
		}
	}()
	c.s.Handler.ServeHTTP(w, r)
	return true
}

// watch starts reading the next request's first byte while the handler runs: an error
// other than a timeout means the client went away, and cancels the request's context, as
// net/http's background read does. The read is then the connection's wait for its next
// request; the request has no body left to read, so nothing else reads meanwhile.
func (c *conn) watch(cancel context.CancelFunc) {
	_ = c.rwc.SetReadDeadline(time.Time{})
	c.watching = true
	go func() {
		_, err := c.br.Peek(1)
		if err != nil && !isTimeout(err) {
			cancel()
		}
		c.watched <- err
	}()
}

// handOff gives the connection, with the bytes read from it so far, to net/http.
func (c *conn) handOff() {
	_ = c.rwc.SetDeadline(time.Time{})
	c.s.forget(c)
	if c.s.OnHandoff != nil {
		c.s.OnHandoff()
	}
	c.s.handoff.give(&replayConn{Conn: c.rwc, br: c.br})
}

// replayConn reads what the fast path had buffered before reading the connection again.
type replayConn struct {
	net.Conn
	br *bufio.Reader
}

func (r *replayConn) Read(p []byte) (int, error) {
	if r.br != nil {
		if r.br.Buffered() > 0 {
			return r.br.Read(p)
		}
		r.br = nil
	}
	return r.Conn.Read(p)
}

// body is a request body of a known length read from the connection.
type body struct {
	c *conn // nil once the handler returned
	n int64 // bytes left
}

var errBodyAfterHandler = errors.New("httpfast: request body read after its handler returned")

func (b *body) Read(p []byte) (int, error) {
	if b.c == nil {
		return 0, errBodyAfterHandler
	}
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.c.br.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && b.n == 0 {
		err = io.EOF
	}
	return n, err
}

func (b *body) Close() error { return nil }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
