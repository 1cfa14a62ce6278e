package cluster

import (
	"strconv"
	"strings"
	"testing"
)

// Whatever a user writes in the annotation, the parser either refuses it or returns the
// replica count written before the slash, at least 1, with a non-empty request id after it.
func FuzzParsePreviewRequest(f *testing.F) {
	for _, s := range []string{"3/abc", "0/x", "-1/x", "3/", "/x", "3", "2147483648/x", "+4/y", "5/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := parsePreviewRequest(v)
		if err != nil {
			return
		}
		head, id, ok := strings.Cut(v, "/")
		want, perr := strconv.ParseInt(head, 10, 32)
		if !ok || id == "" || perr != nil || n < 1 || int64(n) != want {
			t.Fatalf("parsePreviewRequest(%q) = %d, accepted a value it should refuse", v, n)
		}
	})
}
