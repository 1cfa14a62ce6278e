package api

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestAppendJSONStringRoundTripsLikeEncodingJSON: for any string, the escaper's output decodes
// to the same value encoding/json's decoder produces for json.Marshal's output.
func FuzzAppendJSONStringRoundTrip(f *testing.F) {
	for _, s := range []string{"", "hi", "a\"b\\c", "\x00\x1f\n\r\t", "é€𝄞", "\u2028\u2029", "\xff\xfe", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %q for %q", got, s)
		}
		var back, want string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		m, _ := json.Marshal(s)
		_ = json.Unmarshal(m, &want)
		if back != want {
			t.Fatalf("round trip %q: got %q want %q", s, back, want)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("valid UTF-8 %q did not round-trip: %q", s, back)
		}
	})
}
