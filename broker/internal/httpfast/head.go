package httpfast

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// head is a request head of the one shape the fast path serves (docs/internals/http-api.md
// §1.9): an HTTP/1.1 GET or POST in origin form, CRLF line ends, one Host, at most one
// Content-Length, no Transfer-Encoding, Expect, Upgrade or Trailer, and nothing a strict
// reading could take two ways. Its strings are cut from one copy of the head, so they outlive
// the connection's read buffer.
type head struct {
	method   string
	target   string // the request-target as sent
	path     string
	rawQuery string
	host     string
	length   int64 // Content-Length; 0 when absent
	close    bool  // Connection: close
	size     int   // bytes of the head, through its blank line
}

// maxLengthDigits bounds a Content-Length (below 10^18, so it never overflows an int64).
const maxLengthDigits = 18

// headEnd returns the length of the head at the start of b, through its "\r\n\r\n", or -1
// when b does not hold a whole head yet.
func headEnd(b []byte) int {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		return -1
	}
	return i + 4
}

// parseHead reads the head b (exactly the bytes headEnd measured) into hd and the header
// fields into h, which must be empty. ok is false for any head of another shape: the caller
// then leaves the whole connection to net/http, which parses it again from the first byte.
// Whatever parseHead accepts, net/http's http.ReadRequest accepts with the same method,
// target, host, length and fields (FuzzParseHead checks it).
func parseHead(b []byte, h http.Header) (hd head, ok bool) {
	s := string(b) // the one copy every field is cut from
	hd.size = len(s)
	line, rest, ok := cutLine(s)
	if !ok {
		return hd, false
	}
	if !parseRequestLine(line, &hd) {
		return hd, false
	}
	var haveHost, haveLength bool
	vals := make([]string, 0, 8)
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return hd, false
		}
		if line == "" {
			break
		}
		colon := fieldName(line)
		if colon <= 0 {
			return hd, false
		}
		value, ok := fieldValue(line[colon+1:])
		if !ok {
			return hd, false
		}
		name := canonicalName(line[:colon])
		switch name {
		case "Host":
			if haveHost || !validHost(value) {
				return hd, false
			}
			haveHost, hd.host = true, value
			continue // net/http moves Host out of the header map
		case "Content-Length":
			n, ok := parseLength(value)
			if haveLength || !ok {
				return hd, false
			}
			haveLength, hd.length = true, n
		case "Connection":
			switch {
			case strings.EqualFold(value, "close"):
				hd.close = true
			case strings.EqualFold(value, "keep-alive"):
			default:
				return hd, false
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Trailer", "Te":
			return hd, false
		}
		vals = append(vals, value)
		if old, dup := h[name]; dup {
			h[name] = append(old, value)
		} else {
			h[name] = vals[len(vals)-1 : len(vals) : len(vals)] // one backing array for all fields
		}
	}
	return hd, haveHost && rest == ""
}

// cutLine cuts s at its first CRLF; a bare CR or LF before it refuses the head.
func cutLine(s string) (line, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				return s[:i], s[i+2:], true
			}
			return "", "", false
		case '\n':
			return "", "", false
		}
	}
	return "", "", false
}

// parseRequestLine reads "GET|POST SP origin-form SP HTTP/1.1": a path of pathChar bytes
// starting with '/' (no escapes to undo), then an optional query of printable ASCII without
// '#', ';' or '\\' (kept raw, as net/http keeps it).
func parseRequestLine(line string, hd *head) bool {
	switch {
	case len(line) > 4 && line[:4] == "GET ":
		hd.method, line = http.MethodGet, line[4:]
	case len(line) > 5 && line[:5] == "POST ":
		hd.method, line = http.MethodPost, line[5:]
	default:
		return false
	}
	const proto = " HTTP/1.1"
	if len(line) <= len(proto) || line[len(line)-len(proto):] != proto {
		return false
	}
	target := line[:len(line)-len(proto)]
	if target[0] != '/' {
		return false
	}
	q := len(target)
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c == '?' {
			q = i
			break
		}
		if !pathChar(c) {
			return false
		}
	}
	for i := q + 1; i < len(target); i++ {
		c := target[i]
		if c <= ' ' || c >= 0x7f || c == '#' || c == ';' || c == '\\' {
			return false
		}
	}
	if q == len(target)-1 {
		return false // a bare "?" (url.URL.ForceQuery)
	}
	hd.target, hd.path = target, target[:q]
	if q < len(target) {
		hd.rawQuery = target[q+1:]
	}
	return true
}

// pathChar reports whether c stands for itself in a path that net/url would write back
// unchanged (so the URL has no RawPath): letters, digits and - . _ ~ $ & + , / : = @.
func pathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '.', '_', '~', '$', '&', '+', ',', '/', ':', '=', '@':
		return true
	}
	return false
}

// fieldName returns the index of the colon that ends line's field name, or -1 when the
// name is empty or holds anything but token characters.
func fieldName(line string) int {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == ':' {
			return i
		}
		if !httpguts.IsTokenRune(rune(c)) {
			return -1
		}
	}
	return -1
}

// fieldValue trims the spaces and tabs around v; ok is false when v holds a control byte
// other than a tab, DEL or a byte past ASCII.
func fieldValue(v string) (string, bool) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return "", false
		}
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v, true
}

// parseLength reads a Content-Length of 1 to maxLengthDigits decimal digits.
func parseLength(v string) (int64, bool) {
	if v == "" || len(v) > maxLengthDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// validHost accepts a non-empty host[:port] of letters, digits and . - _ : [ ] only.
func validHost(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == '_', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// commonNames are the field names clients send most, canonical, so parsing them allocates
// nothing.
var commonNames = []string{
	"Host", "Content-Length", "Content-Type", "Authorization", "User-Agent", "Accept",
	"Accept-Encoding", "Connection", "X-Forwarded-For",
}

// canonicalName is textproto.CanonicalMIMEHeaderKey for a token, without allocating for the
// common names.
func canonicalName(name string) string {
	for _, c := range commonNames {
		if len(c) == len(name) && strings.EqualFold(name, c) {
			return c
		}
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}
