package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

type refusals struct {
	mu sync.Mutex
	by map[string]int
}

func (r *refusals) observe(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[reason]++
}

func (r *refusals) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[reason]
}

// serve accepts on l until it fails and keeps every accepted connection open.
func serve(l *Listener) (conns <-chan net.Conn) {
	ch := make(chan net.Conn, 64)
	go func() {
		defer close(ch)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	return ch
}

func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server closed c within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func waitAccepted(t *testing.T, conns <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("connection within the limits not accepted")
		return nil
	}
}

func TestConnectionsOverTheCapsAreClosedAndCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &refusals{by: map[string]int{}}
	l := New(ln, Limits{Total: 3, PerIP: 2}, "test", nil, r.observe)
	defer l.Close()
	conns := serve(l)
	addr := ln.Addr().String()

	// Two from 127.0.0.2 fit; the third from it is over the per-IP cap.
	a1, a2 := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)
	s1, s2 := waitAccepted(t, conns), waitAccepted(t, conns)
	over := dialFrom(t, "127.0.0.2", addr)
	if !closedByPeer(over, 5*time.Second) {
		t.Fatal("third connection from one IP stayed open")
	}
	if r.count(ReasonPerIP) != 1 {
		t.Fatalf("per-IP refusals %d, want 1", r.count(ReasonPerIP))
	}
	// Another IP still gets in, up to the total.
	dialFrom(t, "127.0.0.3", addr)
	s3 := waitAccepted(t, conns)
	full := dialFrom(t, "127.0.0.4", addr)
	if !closedByPeer(full, 5*time.Second) {
		t.Fatal("connection over the total cap stayed open")
	}
	if r.count(ReasonTotal) != 1 {
		t.Fatalf("total refusals %d, want 1", r.count(ReasonTotal))
	}
	if total, fromIP := l.Open("127.0.0.2"); total != 3 || fromIP != 2 {
		t.Fatalf("open %d, from 127.0.0.2 %d; want 3 2", total, fromIP)
	}
	// Closing frees the slot (twice frees it once).
	s1.Close()
	s1.Close()
	if total, fromIP := l.Open("127.0.0.2"); total != 2 || fromIP != 1 {
		t.Fatalf("after close: open %d, from 127.0.0.2 %d; want 2 1", total, fromIP)
	}
	again := dialFrom(t, "127.0.0.2", addr)
	s4 := waitAccepted(t, conns)
	if closedByPeer(again, 100*time.Millisecond) {
		t.Fatal("connection within the limits after a close was closed")
	}
	for _, c := range []net.Conn{a1, a2, s2, s3, s4} {
		c.Close()
	}
}

// lockedBuffer is an io.Writer safe for the listener's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A flood over the cap is counted in full but logged only a few lines at a time.
func TestRefusalLogIsRateLimited(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	r := &refusals{by: map[string]int{}}
	l := New(ln, Limits{Total: 1, PerIP: 1}, "test", slog.New(slog.NewTextHandler(&out, nil)), r.observe)
	defer l.Close()
	conns := serve(l)
	dialFrom(t, "127.0.0.2", ln.Addr().String())
	waitAccepted(t, conns)
	const flood = 50
	for range flood {
		c := dialFrom(t, "127.0.0.2", ln.Addr().String())
		if !closedByPeer(c, 5*time.Second) {
			t.Fatal("connection over the cap stayed open")
		}
	}
	if got := r.count(ReasonTotal); got != flood {
		t.Fatalf("refusals counted %d, want %d", got, flood)
	}
	if lines := strings.Count(out.String(), "connection refused"); lines < 1 || lines > logBurst {
		t.Fatalf("%d log lines for %d refusals, want 1…%d", lines, flood, logBurst)
	}
}
