package client

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestEveryErrorStatusMapsToErrorWithFields(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   Error
	}{
		{400, `{"error":"invalid json: x"}` + "\n", Error{Status: 400, Message: "invalid json: x"}},
		{400, `{"error":"bad record","index":3}`, Error{Status: 400, Message: "bad record", Index: ptr(3)}},
		{401, `{"error":"authentication required"}`, Error{Status: 401, Message: "authentication required"}},
		{403, `{"error":"forbidden"}`, Error{Status: 403, Message: "forbidden"}},
		{404, `{"error":"topic not found"}`, Error{Status: 404, Message: "topic not found"}},
		{405, `{"error":"method not allowed"}`, Error{Status: 405, Message: "method not allowed"}},
		{409, `{"error":"refused","node":"narad-4","reasons":["min_voters","no_receivers"]}`,
			Error{Status: 409, Message: "refused", Node: "narad-4", Reasons: []string{"min_voters", "no_receivers"}}},
		{409, `{"error":"no move in flight","owner":"narad-1","target":""}`,
			Error{Status: 409, Message: "no move in flight", Owner: "narad-1"}},
		{422, `{"error":"remote target check failed","reason":"unauthorized"}`,
			Error{Status: 422, Message: "remote target check failed", Reason: "unauthorized"}},
		{410, `{"error":"lease expired"}`, Error{Status: 410, Message: "lease expired"}},
		{413, `{"error":"payload too large","index":0}`, Error{Status: 413, Message: "payload too large", Index: ptr(0)}},
		{429, `{"error":"too many failed authentication attempts"}`, Error{Status: 429, Message: "too many failed authentication attempts"}},
		{500, `{"error":"produce failed"}`, Error{Status: 500, Message: "produce failed"}},
		{503, `{"error":"no leader"}`, Error{Status: 503, Message: "no leader"}},
		{503, `{"status":"shutting down"}`, Error{Status: 503, Message: "shutting down"}},
		{502, "Bad Gateway from proxy\n", Error{Status: 502, Message: "Bad Gateway from proxy"}},
		{504, "", Error{Status: 504, Message: "gateway timeout"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.body), func(t *testing.T) {
			f := newFake(t, tc.status, tc.body)
			err := f.client(t).DeleteTopic(context.Background(), "orders")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if !reflect.DeepEqual(*e, tc.want) {
				t.Fatalf("got %+v, want %+v", *e, tc.want)
			}
			if want := fmt.Sprintf("http %d: %s", tc.status, tc.want.Message); e.Error() != want {
				t.Fatalf("Error() = %q, want %q", e.Error(), want)
			}
			if !IsStatus(err, tc.status) || IsStatus(err, tc.status+1) {
				t.Fatal("IsStatus disagrees with the status")
			}
		})
	}
}

func TestIsStatusSeesThroughWrapping(t *testing.T) {
	err := fmt.Errorf("sub: %w", &Error{Status: 410, Message: "gone"})
	if !IsStatus(err, 410) {
		t.Fatal("wrapped 410 not recognised")
	}
	if IsStatus(errors.New("plain"), 410) || IsStatus(nil, 410) {
		t.Fatal("non-API error recognised as a status")
	}
}

func TestRetryableStatusesFollowTheClientRules(t *testing.T) {
	for status, want := range map[int]bool{400: false, 404: false, 409: false, 410: false, 429: true, 500: true, 503: true} {
		if got := (&Error{Status: status}).Retryable(); got != want {
			t.Errorf("Retryable(%d) = %v, want %v", status, got, want)
		}
	}
}

func FuzzDecodeError(f *testing.F) {
	f.Add(400, []byte(`{"error":"x","index":2}`))
	f.Add(409, []byte(`{"error":"r","node":"n","reasons":["a"],"owner":"o","target":"t"}`))
	f.Add(503, []byte(`{"status":"shutting down"}`))
	f.Add(502, []byte("<html>bad gateway</html>"))
	f.Add(500, []byte{0xff, 0xfe})
	f.Add(599, []byte(`{"error":null}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := decodeError(status, body)
		if e == nil || e.Status != status || e.Message == "" {
			t.Fatalf("decodeError(%d, %q) = %+v", status, body, e)
		}
		if want := fmt.Sprintf("http %d: ", status); len(e.Error()) <= len(want) || e.Error()[:len(want)] != want {
			t.Fatalf("Error() = %q", e.Error())
		}
	})
}
