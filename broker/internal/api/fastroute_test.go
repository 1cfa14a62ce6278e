package api

import "testing"

func TestFastRouteTakesTheHotRoutesOnly(t *testing.T) {
	cases := []struct {
		method, path, query string
		fast, watch         bool
	}{
		{"POST", "/v1/topics/t/produce", "key=k", true, false},
		{"POST", "/v1/topics/t/produce/batch", "", true, false},
		{"POST", "/v1/topics/t/ack", "receipt_handle=1%3A0%3A9", true, false},
		{"POST", "/v1/topics/t/ack/batch", "", true, false},
		{"GET", "/v1/topics/t/consume", "", true, false},
		{"GET", "/v1/topics/t/consume", "wait=0", true, false},
		{"GET", "/v1/topics/t/consume", "max_messages=5&wait=0s", true, false},
		{"GET", "/v1/topics/t/consume", "wait=2s", true, true},
		{"GET", "/v1/topics/t/consume", "partition=1&wait=500ms", true, true},
		{"POST", "/v1/topics/t/consume", "", false, false},
		{"GET", "/v1/topics/t/produce", "", false, false},
		{"GET", "/v1/topics/t", "", false, false},
		{"POST", "/v1/topics", "", false, false},
		{"POST", "/v1/topics//produce", "", false, false},
		{"POST", "/v1/topics/t/children", "", false, false},
		{"GET", "/metrics", "", false, false},
	}
	for _, c := range cases {
		fast, watch := FastRoute(c.method, c.path, c.query)
		if fast != c.fast || watch != c.watch {
			t.Errorf("FastRoute(%s %s?%s) = %v, %v; want %v, %v", c.method, c.path, c.query, fast, watch, c.fast, c.watch)
		}
	}
}
