package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ipv6ThrottleBits is the prefix length an IPv6 client address is grouped by: one host
// usually holds a whole /64, so throttling single IPv6 addresses would throttle nothing.
const ipv6ThrottleBits = 64

// maxForwardedHops bounds how many X-Forwarded-For entries are read from the right.
const maxForwardedHops = 16

// ParseTrustedProxies parses a list of IP addresses and CIDR prefixes (the --trusted-proxies
// setting). An address is a single-host prefix.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// clientKey is the throttle key of the client that sent r: the IP of the TCP peer, or, when
// that peer is a trusted proxy, the right-most X-Forwarded-For entry that is not itself a
// trusted proxy. IPv6 addresses are grouped by /64. A request whose peer address does not
// parse (never the case for a real connection) shares the key "unknown".
func clientKey(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return "unknown"
	}
	client := peer.Unmap().WithZone("")
	if len(trusted) > 0 && isTrusted(client, trusted) {
		client = forwardedClient(r.Header.Values("X-Forwarded-For"), client, trusted)
	}
	if client.Is6() {
		p, _ := client.Prefix(ipv6ThrottleBits)
		return p.String()
	}
	return client.String()
}

// forwardedClient walks the X-Forwarded-For list from the right (the entry the trusted proxy
// added) past trusted proxies and returns the first address that is not one. An entry that
// does not parse ends the walk at the last trusted hop: anything left of it was written by
// the client and proves nothing.
func forwardedClient(headers []string, peer netip.Addr, trusted []netip.Prefix) netip.Addr {
	var hops []string
	for _, h := range headers {
		hops = append(hops, strings.Split(h, ",")...)
	}
	client := peer
	for i, n := len(hops)-1, 0; i >= 0 && n < maxForwardedHops; i, n = i-1, n+1 {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client
		}
		client = a.Unmap().WithZone("")
		if !isTrusted(client, trusted) {
			return client
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
