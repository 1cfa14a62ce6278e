package api

import "strings"

// FastRoute tells the server's fast HTTP/1.1 path (internal/httpfast) which requests it may
// serve: the produce, consume and ack routes, whose handlers use only Header, WriteHeader and
// Write of their ResponseWriter. watch is set for a consume that may long-poll (a wait other
// than 0), whose context must end when the client goes away. Everything else, including these
// routes with any unusual head, is served by net/http (docs/internals/http-api.md §1.9).
func FastRoute(method, path, rawQuery string) (fast, watch bool) {
	rest, ok := strings.CutPrefix(path, "/v1/topics/")
	if !ok {
		return false, false
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return false, false
	}
	switch rest[slash:] {
	case "/produce", "/produce/batch", "/ack", "/ack/batch":
		return method == "POST", false
	case "/consume":
		return method == "GET", method == "GET" && mayWait(rawQuery)
	}
	return false, false
}

// mayWait reports whether a consume query asks for a wait other than 0 (or a malformed
// one, which is answered 400 at once either way).
func mayWait(rawQuery string) bool {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		if v, ok := strings.CutPrefix(kv, "wait="); ok {
			return strings.TrimLeft(v, "0") != "" && v != "0s" && v != "0ms"
		}
	}
	return false
}
