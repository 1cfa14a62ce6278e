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
		sent := bytes.Count(raw, []byte("\uFFFD")) + strings.Count(strings.ToLower(string(raw)), `\ufffd`)
		got := strings.Count(s, "\uFFFD")
		if exact && (!utf8.ValidString(s) || got != sent) {
			t.Fatalf("%q judged exact but decodes to %q (%d replacement characters, %d sent)", raw, s, got, sent)
		}
		if !exact && utf8.Valid(raw) && got == sent && !strings.Contains(strings.ToLower(string(raw)), `\ud`) {
			t.Fatalf("%q judged inexact without invalid UTF-8 or a surrogate escape", raw)
		}
	})
}
