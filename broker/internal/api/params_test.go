package api

import (
	"net/http/httptest"
	"net/url"
	"testing"
)

// paramKeys are the keys the hot handlers look up, plus edge cases of the splitter.
var paramKeys = []string{"key", "partition", "wait", "offset", "max_messages", "receipt_handle", "extend", "", "a", "a b"}

// checkParamsMatchParseQuery fails when params answers a lookup differently from the
// url.Values that r.URL.Query() would give for the same raw query.
func checkParamsMatchParseQuery(t *testing.T, raw string) {
	t.Helper()
	want, _ := url.ParseQuery(raw)
	got := paramsOf(raw)
	for _, k := range paramKeys {
		v, n := got.lookup(k)
		if n != len(want[k]) || (n > 0 && v != want[k][0]) {
			t.Fatalf("query %q key %q: got (%q, %d), url.ParseQuery gives %q", raw, k, v, n, want[k])
		}
		if got.get(k) != want.Get(k) {
			t.Fatalf("query %q key %q: get %q, want %q", raw, k, got.get(k), want.Get(k))
		}
	}
}

var paramsSeeds = []string{
	"", "key=a", "key=a&key=b", "key", "key=", "=x&key=1", "partition=2&offset=0&max_messages=10",
	"a=1&&a=2", "key=a%20b", "key=a+b", "key=a;b", "key=%zz&partition=1", "receipt_handle=abc&extend=true",
	"wait=1s&wait=2s", "a=b=c", "&&&", "key=%", "a%20b=1", "partition=1&key=k&partition=1",
}

func TestParamsMatchParseQuery(t *testing.T) {
	for _, raw := range paramsSeeds {
		checkParamsMatchParseQuery(t, raw)
	}
}

func FuzzParamsMatchParseQuery(f *testing.F) {
	for _, raw := range paramsSeeds {
		f.Add(raw)
	}
	f.Fuzz(checkParamsMatchParseQuery)
}

// TestParamsSkipMapOnPlainQuery proves the point of params: the query shapes the hot handlers
// see (no escapes) are read without allocating.
func TestParamsSkipMapOnPlainQuery(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/topics/t/ack?receipt_handle=0.1.2.3&extend=true", nil)
	allocs := testing.AllocsPerRun(100, func() {
		q := queryParams(r)
		if q.get("receipt_handle") != "0.1.2.3" || q.get("extend") != "true" {
			t.Fatal("wrong values")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup, want 0", allocs)
	}
}
