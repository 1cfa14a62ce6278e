package api

import (
	"net/http"
	"unicode/utf8"
)

// Request strings the client chooses (method, path) reach metrics and logs only bounded:
// a label takes one of a fixed set of values, a log line a prefix of fixed length
// (docs/operating.md, Metrics).

// otherMethod is the method label of every method not in knownMethods (client_golang's
// promhttp does the same with its own value).
const otherMethod = "other"

// knownMethods are the RFC 9110 methods plus PATCH: their label is their name.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodConnect: true,
	http.MethodOptions: true, http.MethodTrace: true,
}

// methodLabel is the metrics method label of m: its name when it is a known method (exact,
// case-sensitive, as methods are), otherMethod for anything else.
func methodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	return otherMethod
}

// maxLoggedLen bounds a client-chosen string written to a log line.
const maxLoggedLen = 256

// logValue is s cut to maxLoggedLen bytes (at a rune boundary) with "…" appended when cut.
func logValue(s string) string {
	if len(s) <= maxLoggedLen {
		return s
	}
	cut := maxLoggedLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
