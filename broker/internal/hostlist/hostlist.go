// Package hostlist is an allow-list of network targets: host names, host:port pairs and IP
// networks (CIDR). It compares what is written, never what a name resolves to: a name entry
// allows that name (any address it resolves to), an IP or CIDR entry allows only IP literals.
// The remote fan-out children use it for --remote-allowed-hosts (docs/fanout.md, Remote
// children; docs/operating.md, Security).
package hostlist

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// MaxEntries bounds a list (a configuration value, not client input).
const MaxEntries = 256

// List is a parsed allow-list. The zero List (no entries) allows every host: an empty
// --remote-allowed-hosts means no restriction. A List is read-only after Parse, so it is safe
// for concurrent use.
type List struct {
	entries []entry
}

type entry struct {
	host   string       // lower-case name or canonical IP text; "" for a CIDR entry
	port   int          // 0 = any port
	prefix netip.Prefix // valid for a CIDR entry
}

// Parse reads entries: "name", "name:port", "1.2.3.4", "1.2.3.4:port", "[::1]:port", "::1"
// or "10.0.0.0/8". Blank entries are skipped. The first bad entry is an error.
func Parse(entries []string) (List, error) {
	var l List
	for _, raw := range entries {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		e, err := parseEntry(s)
		if err != nil {
			return List{}, err
		}
		l.entries = append(l.entries, e)
	}
	if len(l.entries) > MaxEntries {
		return List{}, fmt.Errorf("at most %d entries", MaxEntries)
	}
	return l, nil
}

func parseEntry(s string) (entry, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return entry{}, fmt.Errorf("%q: bad CIDR", clip(s))
		}
		return entry{prefix: p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return entry{host: a.Unmap().String()}, nil
	}
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return entry{}, fmt.Errorf("%q: bad port", clip(s))
		}
		host, port = h, n
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return entry{host: a.Unmap().String(), port: port}, nil
	}
	if !validName(host) {
		return entry{}, fmt.Errorf("%q: not a host name, host:port, IP or CIDR", clip(s))
	}
	return entry{host: strings.ToLower(strings.TrimSuffix(host, ".")), port: port}, nil
}

// validName accepts DNS-style names: letters, digits, '-', '_' and '.', at most 253 bytes.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Empty reports whether the list has no entries (everything allowed).
func (l List) Empty() bool { return len(l.entries) == 0 }

// Allows reports whether hostport (a URL's host: "name:port", "1.2.3.4:port", "[::1]:port")
// is on the list. An empty list allows everything; an unparsable hostport is refused.
func (l List) Allows(hostport string) bool {
	if l.Empty() {
		return true
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return false
	}
	addr, aerr := netip.ParseAddr(h)
	isIP := aerr == nil
	if isIP {
		addr = addr.Unmap()
		h = addr.String()
	} else {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
	}
	for _, e := range l.entries {
		switch {
		case e.prefix.IsValid():
			if isIP && e.prefix.Contains(addr) {
				return true
			}
		case e.host == h && (e.port == 0 || e.port == port):
			return true
		}
	}
	return false
}
