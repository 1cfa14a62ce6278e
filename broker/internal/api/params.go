package api

import (
	"net/http"
	"net/url"
	"strings"
)

// params is a request's query parameters as the hot handlers (produce, consume, ack) read
// them. It gives the same answers as url.ParseQuery (what r.URL.Query() returns): a query
// that needs no unescaping and has no ';' is read in place, without a map or copies, and any
// other query goes through url.ParseQuery once.
type params struct {
	raw  string     // the raw query; read only when vals is nil
	vals url.Values // set when raw needs url.ParseQuery's unescaping or its ';' rule
}

// queryParams returns r's query parameters.
func queryParams(r *http.Request) params {
	return paramsOf(r.URL.RawQuery)
}

// paramsOf wraps a raw query string.
func paramsOf(raw string) params {
	if strings.ContainsAny(raw, "%+;") {
		return valuesParams(url.ParseQuery(raw))
	}
	return params{raw: raw}
}

// valuesParams wraps already parsed values; the parse error is dropped as r.URL.Query does.
func valuesParams(v url.Values, _ error) params {
	if v == nil {
		v = url.Values{}
	}
	return params{vals: v}
}

// lookup returns key's first value and how many times key was given.
func (p params) lookup(key string) (first string, n int) {
	if p.vals != nil {
		vs := p.vals[key]
		if len(vs) == 0 {
			return "", 0
		}
		return vs[0], len(vs)
	}
	rest := p.raw
	for rest != "" {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		k, v, _ := strings.Cut(pair, "=")
		if pair == "" || k != key {
			continue
		}
		if n == 0 {
			first = v
		}
		n++
	}
	return first, n
}

// get returns key's first value, "" when absent (url.Values.Get).
func (p params) get(key string) string {
	v, _ := p.lookup(key)
	return v
}
