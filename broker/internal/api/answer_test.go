package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// TestJSONAnswersCarryContentLength holds writeRawJSON's shortcut to net/http's behaviour
// over a real connection: small answers (whose length net/http counts itself), answers
// around selfLengthBytes and large batch answers all arrive with a Content-Length and
// without chunked framing.
func TestJSONAnswersCarryContentLength(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders", Partitions: 1})
	var size int
	env.be.consumeFn = func(_ meta.Topic, req service.ConsumeRequest) ([]service.Message, error) {
		msgs := make([]service.Message, req.Max)
		for i := range msgs {
			msgs[i] = service.Message{Topic: "orders", Offset: int64(i), ReceiptHandle: "0:1:1",
				Payload: bytes.Repeat([]byte("x"), size)}
		}
		return msgs, nil
	}
	srv := httptest.NewServer(env.h)
	defer srv.Close()
	for _, c := range []struct {
		size int
		max  int
	}{{10, 1}, {1024, 1}, {selfLengthBytes - 120, 1}, {selfLengthBytes - 60, 1}, {selfLengthBytes, 1}, {1024, 300}} {
		size = c.size
		req, _ := http.NewRequest("GET", srv.URL+"/v1/topics/orders/consume?max_messages="+strconv.Itoa(c.max), nil)
		req.SetBasicAuth("alice", "pw-alice")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("payload %d × %d: status %d, %v", c.size, c.max, resp.StatusCode, err)
		}
		if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
			t.Errorf("payload %d × %d (%d bytes): Content-Length %d, Transfer-Encoding %v",
				c.size, c.max, len(body), resp.ContentLength, resp.TransferEncoding)
		}
	}
}

// TestConsumeAnswersDoNotShareBuffers proves the pooled answer buffers are handed back only
// once written: answers of different lengths, one after another, each hold their own message.
func TestConsumeAnswersDoNotShareBuffers(t *testing.T) {
	env := newEnv(t)
	env.be.addTopic(meta.Topic{Name: "orders", Partitions: 1})
	n := 0
	env.be.consumeFn = func(meta.Topic, service.ConsumeRequest) ([]service.Message, error) {
		n++
		return []service.Message{{Topic: "orders", Offset: int64(n), ReceiptHandle: "0:1:1",
			Payload: bytes.Repeat([]byte{'a' + byte(n%26)}, 4000/n)}}, nil
	}
	var prev string
	for i := 1; i <= 20; i++ {
		rec := env.do("GET", "/v1/topics/orders/consume", "alice", nil)
		expectStatus(t, rec, 200)
		want := fmt.Sprintf(`{"topic":"orders","partition":0,"offset":%d,"payload":"%s"`, i,
			bytes.Repeat([]byte{'a' + byte(i%26)}, 4000/i))
		got := rec.Body.String()
		if !bytes.HasPrefix([]byte(got), []byte(want)) || got == prev {
			t.Fatalf("answer %d: %.80s…, want %.80s…", i, got, want)
		}
		prev = got
	}
}

// TestMuxRedirectPassesThroughUnmatched proves the answers the mux writes itself while it
// looks for a route (here the redirect of an unclean path) reach the client unchanged and
// are labelled unmatched, now that the mux routes each request only once.
func TestMuxRedirectPassesThroughUnmatched(t *testing.T) {
	env := newEnv(t)
	rec := env.do("GET", "/v1/./topics", "alice", nil)
	redirect := rec.Code
	if redirect/100 != 3 || rec.Header().Get("Location") != "/v1/topics" {
		t.Fatalf("status %d, Location %q; want a redirect to /v1/topics", rec.Code, rec.Header().Get("Location"))
	}
	rec = env.do("GET", "/v1/topics", "alice", nil)
	expectStatus(t, rec, http.StatusOK)
	env.obs.mu.Lock()
	defer env.obs.mu.Unlock()
	want := []string{fmt.Sprintf("unmatched|GET|%d", redirect), "GET /v1/topics|GET|200"}
	if fmt.Sprint(env.obs.routes) != fmt.Sprint(want) {
		t.Fatalf("observed %q, want %q", env.obs.routes, want)
	}
}
