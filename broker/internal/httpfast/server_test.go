package httpfast

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testServer runs a Server with its net/http side on a loopback port. Paths under /fast/ are
// fast (those under /fast/wait/ watched); everything else goes to net/http. Each answer
// names the path that served it in the X-Served-By field.
type testServer struct {
	addr     string
	srv      *Server
	std      *http.Server
	fastSeen atomic.Int64
	handoffs atomic.Int64
	stdSeen  atomic.Int64
}

func startServer(t testing.TB, h http.HandlerFunc, tune func(*http.Server)) *testServer {
	t.Helper()
	ts := &testServer{}
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*response); ok {
			ts.fastSeen.Add(1)
			w.Header().Set("X-Served-By", "fast")
		} else {
			ts.stdSeen.Add(1)
			w.Header().Set("X-Served-By", "std")
		}
		h(w, r)
	})
	ts.std = &http.Server{Handler: wrapped, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	if tune != nil {
		tune(ts.std)
	}
	ts.srv = &Server{Handler: wrapped, Std: ts.std, Route: func(method, path, _ string) (bool, bool) {
		return strings.HasPrefix(path, "/fast/"), strings.HasPrefix(path, "/fast/wait/")
	}, OnHandoff: func() { ts.handoffs.Add(1) }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	go func() { _ = ts.std.Serve(ts.srv.Handoff()) }()
	go func() { _ = ts.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = ts.srv.Shutdown(ctx)
		_ = ts.std.Shutdown(ctx)
	})
	return ts
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s q=%s host=%s len=%d remote=%v body=%s auth=%s",
		r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.ContentLength, r.RemoteAddr != "", b, r.Header.Get("Authorization"))
}

// exchange writes raw to a new connection and reads n answers from it.
func exchange(t *testing.T, addr, raw string, n int) ([]*http.Response, []string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var resps []*http.Response
	var bodies []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", len(resps)+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d body: %v", len(resps)+1, err)
		}
		resps = append(resps, resp)
		bodies = append(bodies, string(b))
	}
	return resps, bodies, c
}

func TestFastRequestsKeepAliveAndPipeline(t *testing.T) {
	ts := startServer(t, echo, nil)
	raw := "POST /fast/p?x=1 HTTP/1.1\r\nHost: h1\r\nAuthorization: Basic dTpw\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /fast/c HTTP/1.1\r\nHost: h1\r\n\r\n" +
		"POST /fast/a?h=1%3A0%3A9 HTTP/1.1\r\nHost: h1\r\nContent-Length: 3\r\n\r\nabc"
	resps, bodies, _ := exchange(t, ts.addr, raw, 3)
	want := []string{
		"POST /fast/p q=x=1 host=h1 len=5 remote=true body=hello auth=Basic dTpw",
		"GET /fast/c q= host=h1 len=0 remote=true body= auth=",
		"POST /fast/a q=h=1%3A0%3A9 host=h1 len=3 remote=true body=abc auth=",
	}
	for i, r := range resps {
		if r.StatusCode != 200 || bodies[i] != want[i] || r.Header.Get("X-Served-By") != "fast" {
			t.Errorf("answer %d: %d %q by %s, want 200 %q by fast", i, r.StatusCode, bodies[i], r.Header.Get("X-Served-By"), want[i])
		}
		if r.ContentLength != int64(len(want[i])) || r.Header.Get("Date") == "" || r.Close {
			t.Errorf("answer %d: length %d, date %q, close %v", i, r.ContentLength, r.Header.Get("Date"), r.Close)
		}
	}
	if ts.stdSeen.Load() != 0 || ts.handoffs.Load() != 0 {
		t.Fatalf("net/http served %d requests on %d connections", ts.stdSeen.Load(), ts.handoffs.Load())
	}
}

// The first request of another shape hands the connection, bytes and all, to net/http,
// which serves it and every request after it on that connection.
func TestOtherRequestsHandTheConnectionToNetHTTP(t *testing.T) {
	ts := startServer(t, echo, nil)
	raw := "GET /fast/one HTTP/1.1\r\nHost: h\r\n\r\n" +
		"POST /fast/chunked HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"GET /fast/three HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /other HTTP/1.1\r\nHost: h\r\n\r\n"
	resps, bodies, _ := exchange(t, ts.addr, raw, 4)
	by := []string{"fast", "std", "std", "std"}
	want := []string{"GET /fast/one", "POST /fast/chunked q= host=h len=-1 remote=true body=abc", "GET /fast/three", "GET /other"}
	for i, r := range resps {
		if r.StatusCode != 200 || !strings.HasPrefix(bodies[i], want[i]) || r.Header.Get("X-Served-By") != by[i] {
			t.Errorf("answer %d: %d %q by %s, want %q by %s", i, r.StatusCode, bodies[i], r.Header.Get("X-Served-By"), want[i], by[i])
		}
	}
	// A malformed head reaches net/http too, which refuses it.
	resps, _, _ = exchange(t, ts.addr, "GET /fast/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 1)
	if resps[0].StatusCode != http.StatusBadRequest {
		t.Fatalf("two Host fields: %d, want 400 from net/http", resps[0].StatusCode)
	}
	if n := ts.handoffs.Load(); n != 2 {
		t.Fatalf("%d connections handed over, want 2", n)
	}
}

func TestAnswersAreFramedAsNetHTTPWouldFrameThem(t *testing.T) {
	big := strings.Repeat("x", maxHeld+10)
	ts := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fast/empty":
			w.WriteHeader(http.StatusAccepted)
		case "/fast/nocontent":
			w.WriteHeader(http.StatusNoContent)
			if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
				panic("body on 204 allowed")
			}
		case "/fast/declared":
			w.Header().Set("Content-Length", "4")
			_, _ = w.Write([]byte("ab"))
			_, _ = w.Write([]byte("cd"))
			if _, err := w.Write([]byte("e")); !errors.Is(err, http.ErrContentLength) {
				panic("write past Content-Length allowed")
			}
		case "/fast/big":
			_, _ = io.WriteString(w, big[:10])
			_, _ = io.WriteString(w, big[10:])
		case "/fast/split":
			w.Header().Set("X-Bad", "a\r\nInjected: yes")
			w.Header().Set("Bad Name", "v")
			_, _ = io.WriteString(w, "<html></html>")
		}
	}, nil)
	raw := "GET /fast/empty HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /fast/nocontent HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /fast/declared HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /fast/big HTTP/1.1\r\nHost: h\r\n\r\n" +
		"GET /fast/split HTTP/1.1\r\nHost: h\r\n\r\n"
	resps, bodies, _ := exchange(t, ts.addr, raw, 5)
	if r := resps[0]; r.StatusCode != 202 || r.ContentLength != 0 || bodies[0] != "" {
		t.Errorf("empty 202: %d length %d %q", r.StatusCode, r.ContentLength, bodies[0])
	}
	if r := resps[1]; r.StatusCode != 204 || r.Header.Get("Content-Length") != "" || bodies[1] != "" {
		t.Errorf("204: %d length %q %q", r.StatusCode, r.Header.Get("Content-Length"), bodies[1])
	}
	if r := resps[2]; r.ContentLength != 4 || bodies[2] != "abcd" {
		t.Errorf("declared: length %d %q", r.ContentLength, bodies[2])
	}
	if r := resps[3]; len(r.TransferEncoding) != 1 || r.TransferEncoding[0] != "chunked" || bodies[3] != big {
		t.Errorf("big: encoding %v, %d bytes", r.TransferEncoding, len(bodies[3]))
	}
	r := resps[4]
	if r.Header.Get("Injected") != "" || r.Header.Get("X-Bad") != "a  Injected: yes" || r.Header.Get("Bad Name") != "" {
		t.Errorf("fields: %v", r.Header)
	}
	if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("sniffed Content-Type %q", ct)
	}
}

// A body the handler leaves unread that has not arrived yet closes the connection after
// the answer; one already buffered is skipped and the connection kept.
func TestUnreadBodies(t *testing.T) {
	ts := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, nil)
	resps, _, c := exchange(t, ts.addr, "POST /fast/a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /fast/b HTTP/1.1\r\nHost: h\r\n\r\n", 2)
	if resps[0].Close || resps[1].Close {
		t.Fatal("buffered unread body closed the connection")
	}
	_ = c.Close()
	resps, _, c = exchange(t, ts.addr, "POST /fast/a HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\nabc", 1)
	if !resps[0].Close {
		t.Fatal("answer to a request with an unread body does not say Connection: close")
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection left open")
	}

	// A client still sending a large body gets the early answer: closing at once, with bytes
	// unread, would reset the connection under the client's write.
	for i := range 4 {
		resp, err := http.Post("http://"+ts.addr+"/fast/a", "text/plain", bytes.NewReader(make([]byte, 8<<20)))
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || !resp.Close {
			t.Fatalf("post %d: %d, close %v", i, resp.StatusCode, resp.Close)
		}
	}
}

// A watched request's context ends when its client goes away, as net/http's does.
func TestWatchedRequestEndsWhenTheClientLeaves(t *testing.T) {
	ended := make(chan error, 1)
	ts := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(3 * time.Second):
			ended <- nil
		}
	}, nil)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /fast/wait/x HTTP/1.1\r\nHost: h\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	_ = c.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ended with %v, want its context cancelled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler still running")
	}
	// A watched request whose client stays gets its answer, and the connection goes on.
	ts2 := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		_, _ = io.WriteString(w, r.URL.Path)
	}, nil)
	_, bodies, _ := exchange(t, ts2.addr, "GET /fast/wait/1 HTTP/1.1\r\nHost: h\r\n\r\nGET /fast/wait/2 HTTP/1.1\r\nHost: h\r\n\r\nGET /fast/3 HTTP/1.1\r\nHost: h\r\n\r\n", 3)
	if strings.Join(bodies, ",") != "/fast/wait/1,/fast/wait/2,/fast/3" {
		t.Fatalf("answers %q", bodies)
	}
}

func TestTimeoutsCloseConnections(t *testing.T) {
	ts := startServer(t, echo, func(s *http.Server) {
		s.ReadHeaderTimeout, s.IdleTimeout = 200*time.Millisecond, 300*time.Millisecond
	})
	for _, raw := range []string{"", "GET /fast/x HTTP/1.1\r\nHo", "GET /fast/x HTTP/1.1\r\nHost: h\r\n\r\n"} {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, raw)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		start := time.Now()
		_, err = io.ReadAll(c)
		if err != nil || time.Since(start) > 2*time.Second {
			t.Errorf("%q: read ended after %v with %v, want EOF within the timeout", raw, time.Since(start), err)
		}
		_ = c.Close()
	}
}

func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	ts := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast/panic" {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok")
	}, nil)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET /fast/panic HTTP/1.1\r\nHost: h\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Fatalf("after a panic: %q, %v; want the connection closed without an answer", b, err)
	}
	if _, bodies, _ := exchange(t, ts.addr, "GET /fast/ok HTTP/1.1\r\nHost: h\r\n\r\n", 1); bodies[0] != "ok" {
		t.Fatalf("next connection: %q", bodies[0])
	}
}

// Shutdown closes idle connections at once and lets a request being served finish, with
// Connection: close.
func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}, nil)
	_, _, idleConn := exchange(t, ts.addr, "GET /fast/quick HTTP/1.1\r\nHost: h\r\n\r\n", 1)
	busy, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(busy, "GET /fast/slow HTTP/1.1\r\nHost: h\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- ts.srv.Shutdown(ctx)
	}()
	_ = idleConn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idleConn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("idle connection: %v, want it closed", err)
	}
	close(release)
	_ = busy.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close {
		t.Fatal("the last answer does not say Connection: close")
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

// flakyListener fails its first Accept calls the way an exhausted process does.
type flakyListener struct {
	net.Listener
	fails atomic.Int64
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// An accept that fails (out of file descriptors) is retried: the server keeps serving.
func TestAcceptErrorsDoNotStopTheServer(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &flakyListener{Listener: inner}
	ln.fails.Store(3)
	std := &http.Server{Handler: http.HandlerFunc(echo), ReadHeaderTimeout: time.Second}
	srv := &Server{Handler: std.Handler, Std: std, Route: func(string, string, string) (bool, bool) { return true, false }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	_, bodies, _ := exchange(t, inner.Addr().String(), "GET /x HTTP/1.1\r\nHost: h\r\n\r\n", 1)
	if !strings.HasPrefix(bodies[0], "GET /x") {
		t.Fatalf("answer %q", bodies[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v, want http.ErrServerClosed", err)
	}
}
