package server

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// net/http answers oversized headers (431) and malformed requests (400) itself, before any
// handler; through jsonErrorsListener those answers are JSON like every other error, with
// the same status, while handler answers pass unchanged.
func TestNetHTTPConnectionErrorsAreJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		MaxHeaderBytes:    1 << 10,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("handler"))
		}),
	}
	go func() { _ = srv.Serve(jsonErrorsListener{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })

	cases := []struct {
		name, request string
		status        int
		wantInError   string
	}{
		{"431 header fields too large", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n",
			431, "request header fields too large"},
		{"400 malformed request line", "GARBAGE\r\n\r\n", 400, "bad request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := roundTripRaw(t, ln.Addr().String(), c.request)
			defer resp.Body.Close()
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d content type %q, want %d application/json", resp.StatusCode, resp.Header.Get("Content-Type"), c.status)
			}
			var body map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || !strings.Contains(body["error"], c.wantInError) {
				t.Fatalf("body %v (%v), want an error containing %q", body, err, c.wantInError)
			}
		})
	}
	resp := roundTripRaw(t, ln.Addr().String(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("handler answer altered: %d %v", resp.StatusCode, resp.Header)
	}
}

// roundTripRaw writes request as is on a new connection and parses the answer.
func roundTripRaw(t *testing.T, addr, request string) *http.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// FuzzJSONConnError: never a panic; a rewrite is a complete response with the same status
// line and a JSON body holding "error".
func FuzzJSONConnError(f *testing.F) {
	f.Add([]byte("HTTP/1.1 431 Request Header Fields Too Large" + netHTTPErrorHeaders + "431 Request Header Fields Too Large"))
	f.Add([]byte("HTTP/1.1 400 Bad Request" + netHTTPErrorHeaders + "400 Bad Request: malformed HTTP request \"x\""))
	f.Add([]byte("HTTP/1.1 200 OK\r\nDate: x\r\n\r\nbody"))
	f.Fuzz(func(t *testing.T, p []byte) {
		out, ok := jsonConnError(p)
		if !ok {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
		if err != nil {
			t.Fatalf("rewrite of %q is not a response: %v", p, err)
		}
		defer resp.Body.Close()
		var body map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body["error"] == "" || resp.StatusCode < 400 {
			t.Fatalf("rewrite of %q: status %d body %v (%v)", p, resp.StatusCode, body, err)
		}
	})
}
