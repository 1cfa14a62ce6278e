package httpfast

import (
	"bufio"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// headSeeds are heads of the fast shape and near misses of it.
var headSeeds = []string{
	"GET /v1/topics/t/consume?wait=1s HTTP/1.1\r\nHost: 127.0.0.1:7942\r\n\r\n",
	"POST /v1/topics/t/produce?key=k HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\n",
	"POST /v1/topics/t/ack HTTP/1.1\r\nHost: a\r\nAuthorization: Basic dTpw\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
	"POST /v1/topics/t/produce HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nx-a:  2 \r\nContent-Length: 1\r\n\r\n",
	"POST /v1/topics/t/produce HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST /v1/topics/t/produce HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"GET /v1/topics/t%2F/consume HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET /a HTTP/1.1\r\n\r\n",
	"GET /a HTTP/1.1\nHost: a\n\n",
	"GET /a HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost : a\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: a b\r\n\r\n",
	"GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
}

// FuzzParseHead holds parseHead to net/http's reading: whatever head it accepts,
// http.ReadRequest reads with the same method, target, path, query, host, length, close and
// fields, so serving it here or in net/http makes no difference to the handler.
func FuzzParseHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end := headEnd(b)
		if end < 0 {
			return
		}
		h := http.Header{}
		hd, ok := parseHead(b[:end], h)
		if !ok {
			return
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(string(b[:end]))))
		if err != nil {
			t.Fatalf("parseHead accepted %q, net/http refused it: %v", b[:end], err)
		}
		switch {
		case r.Method != hd.method, r.RequestURI != hd.target, r.URL.Path != hd.path,
			r.URL.RawQuery != hd.rawQuery, r.URL.RawPath != "", r.Host != hd.host,
			r.ContentLength != hd.length, r.Close != hd.close, hd.size != end:
			t.Fatalf("%q: parseHead %+v, net/http %s %s path %q query %q host %q length %d close %v",
				b[:end], hd, r.Method, r.RequestURI, r.URL.Path, r.URL.RawQuery, r.Host, r.ContentLength, r.Close)
		}
		if !maps.EqualFunc(h, r.Header, slices.Equal) {
			t.Fatalf("%q: fields %v, net/http %v", b[:end], h, r.Header)
		}
	})
}

func TestParseHeadRefusesWhatItDoesNotServe(t *testing.T) {
	for i, s := range headSeeds {
		end := headEnd([]byte(s))
		if end < 0 {
			if i > 3 {
				continue // bare LF heads never end for headEnd: left to net/http
			}
			t.Fatalf("seed %d has no head end", i)
		}
		_, ok := parseHead([]byte(s[:end]), http.Header{})
		if want := i < 4; ok != want {
			t.Errorf("parseHead(%q) ok = %v, want %v", s, ok, want)
		}
	}
}

func TestParseHeadFields(t *testing.T) {
	s := headSeeds[3]
	h := http.Header{}
	hd, ok := parseHead([]byte(s), h)
	if !ok {
		t.Fatal("refused")
	}
	if hd.method != "POST" || hd.path != "/v1/topics/t/produce" || hd.host != "a" || hd.length != 1 {
		t.Fatalf("head %+v", hd)
	}
	if got := h["X-A"]; !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("X-A = %q", got)
	}
	if _, ok := h["Host"]; ok {
		t.Fatal("Host left in the fields")
	}
}
