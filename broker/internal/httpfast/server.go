// Package httpfast serves the client API's hot requests (produce, consume, ack) on plain
// HTTP/1.1 connections with less work per request than net/http, and hands every other
// connection to a net/http Server (docs/internals/http-api.md §1.9).
//
// A connection starts here. Each request whose head has the common strict shape (parseHead)
// and whose route the Route function accepts is read into a fresh http.Request with header
// maps the connection reuses, and is served by the same
// http.Handler net/http would call. The first request of any other shape, and everything after
// it, goes to net/http with the bytes read so far: the connection is handed over whole, so
// net/http's parser, limits and error answers apply to everything the fast path does not
// recognise. What the fast path saves is net/http's per-request goroutine for the background
// read, its deadline resets, its request and header allocations and its response header
// formatting.
package httpfast

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves fast requests and hands the rest to Std. Set the fields before Serve.
type Server struct {
	// Handler serves every fast request (the handler Std serves too).
	Handler http.Handler
	// Std serves the connections handed over (Serve it on Handoff()); its ReadHeaderTimeout,
	// ReadTimeout, WriteTimeout and IdleTimeout bound the fast path's connections as well.
	Std *http.Server
	// Route tells which requests the fast path serves: fast for a method and path whose
	// handler uses only Header, WriteHeader and Write of its ResponseWriter, and watch for
	// one that may wait long (a long poll), whose context is then cancelled when the client
	// goes away.
	Route func(method, path, rawQuery string) (fast, watch bool)
	// Logger receives handler panics; nil discards them.
	Logger *slog.Logger
	// OnHandoff, when set, is called for each connection handed to Std.
	OnHandoff func()

	initOnce sync.Once
	handoff  *handoffListener
	base     context.Context
	cancel   context.CancelFunc

	mu      sync.Mutex
	conns   map[*conn]struct{}
	ln      net.Listener
	closing atomic.Bool
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.handoff = &handoffListener{ch: make(chan net.Conn), done: make(chan struct{})}
		s.base, s.cancel = context.WithCancel(context.Background())
		s.conns = map[*conn]struct{}{}
		if s.Logger == nil {
			s.Logger = slog.New(slog.DiscardHandler)
		}
	})
}

// Handoff is the listener Std must serve: it yields the connections the fast path hands
// over, each replaying the bytes already read from it.
func (s *Server) Handoff() net.Listener {
	s.init()
	return s.handoff
}

// Serve accepts connections from ln until it fails or Shutdown is called
// (http.ErrServerClosed).
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	s.handoff.setAddr(ln.Addr())
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	if s.closing.Load() {
		_ = ln.Close()
		return http.ErrServerClosed
	}
	var pause time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors, a connection reset before accept, …: wait and go
			// on, as net/http does, rather than stop serving.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.Logger.Warn("http accept failed; retrying", "err", err, "after", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		c := s.newConn(rwc)
		if c == nil {
			_ = rwc.Close()
			continue
		}
		go c.serve()
	}
}

// Shutdown stops accepting, closes idle connections, lets the requests being served finish
// (their connections close after the answer) and waits for them until ctx ends; then it
// closes what is left. It does not shut Std down.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.closing.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	s.mu.Unlock()
	s.handoff.Close()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if s.closeIdle() == 0 {
			s.cancel()
			return nil
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for c := range s.conns {
				_ = c.rwc.Close()
			}
			s.mu.Unlock()
			s.cancel()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// closeIdle wakes every connection waiting for its next request (it sees the server
// closing and closes) and returns how many connections are still open.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.idle.Load() {
			_ = c.rwc.SetReadDeadline(time.Unix(1, 0))
		}
	}
	return len(s.conns)
}

func (s *Server) newConn(rwc net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return nil
	}
	c := newConn(s, rwc)
	s.conns[c] = struct{}{}
	return c
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handoffListener is the listener Std serves: Accept yields the handed-over connections.
type handoffListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr atomic.Pointer[net.Addr]
}

func (l *handoffListener) setAddr(a net.Addr) { l.addr.Store(&a) }

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr {
	if a := l.addr.Load(); a != nil {
		return *a
	}
	return &net.TCPAddr{}
}

// give hands c to Std; c is closed when Std no longer accepts.
func (l *handoffListener) give(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		_ = c.Close()
	}
}
