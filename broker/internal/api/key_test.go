package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRawJSONStringIsExact: a string literal judged exact decodes with encoding/json to
// valid UTF-8 whose every U+FFFD was sent as such (literally or as a \ufffd escape), so no
// replacement character is ever invented; a literal judged inexact holds invalid UTF-8 or a
// lone surrogate escape.
func FuzzRawJSONStringIsExact(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `"\ufffd"`, `"\\ud800"`, `"\"\u00e9"`, `"�"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		exact := rawJSONStringIsExact(raw)
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return // not a JSON string literal: the decoder refuses it anyway
		}
		sent := bytes.Count(raw, []byte("\uFFFD")) + replacementEscapes(raw)
		got := strings.Count(s, "\uFFFD")
		if exact && (!utf8.ValidString(s) || got != sent) {
			t.Fatalf("%q judged exact but decodes to %q (%d replacement characters, %d sent)", raw, s, got, sent)
		}
		if !exact && utf8.Valid(raw) && got == sent && !strings.Contains(strings.ToLower(string(raw)), `\ud`) {
			t.Fatalf("%q judged inexact without invalid UTF-8 or a surrogate escape", raw)
		}
	})
}

// replacementEscapes counts the \ufffd escapes (any case) in a JSON string literal, skipping
// every other escape, so an escaped backslash followed by "ufffd" is text, not one of them.
func replacementEscapes(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] == 'u' && i+6 <= len(raw) && strings.EqualFold(string(raw[i+2:i+6]), "fffd") {
			n++
			i += 5
			continue
		}
		i++ // the escaped character
	}
	return n
}
