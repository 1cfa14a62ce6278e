package httpfast

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// FuzzServeConn sends arbitrary bytes on a connection, half-closes it and reads what comes
// back: the server neither panics nor hangs, and everything it writes parses as HTTP/1.1
// answers, whichever path served them.
func FuzzServeConn(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("POST /fast/a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /fast/wait/b HTTP/1.1\r\nHost: h\r\n\r\n"))
	f.Add([]byte("POST /fast/a HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nab"))
	ts := startServer(f, echo, func(s *http.Server) {
		s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout = time.Second, time.Second, time.Second
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(in); err != nil {
			return // the server may close on bad input before reading it all
		}
		_ = c.(*net.TCPConn).CloseWrite()
		br := bufio.NewReader(c)
		for {
			if _, err := br.Peek(1); err != nil {
				if isTimeout(err) {
					t.Fatalf("%q: no end of the answers within 5 s", in)
				}
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%q: an answer does not parse: %v", in, err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				if isTimeout(err) {
					t.Fatalf("%q: answer body still open after 5 s", in)
				}
				return // cut off by a close: the reset of an unread request
			}
		}
	})
}
