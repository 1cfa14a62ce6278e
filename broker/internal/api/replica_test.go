package api

import (
	"context"
	"net/http"
	"testing"

	"narad.dev/broker/internal/meta"
)

// laggingBackend is a backend whose metadata replica is not current (a node still catching up).
type laggingBackend struct {
	*fakeBackend
	current bool
}

func (b laggingBackend) ReplicaCurrent() bool { return b.current }

func (b laggingBackend) AwaitTopic(context.Context, string) (meta.Topic, bool) {
	return meta.Topic{}, false
}

func TestUnknownTopicOnALaggingReplicaAnswers503Not404(t *testing.T) {
	for _, current := range []bool{false, true} {
		want := http.StatusServiceUnavailable
		if current {
			want = http.StatusNotFound
		}
		env := newEnv(t)
		env = newEnv(t, func(o *Options) { o.Backend = laggingBackend{env.be, current} })
		for _, rq := range []struct{ method, path string }{
			{"POST", "/v1/topics/orders-new/produce"},
			{"GET", "/v1/topics/orders-new/consume"},
			{"GET", "/v1/topics/orders-new"},
			{"POST", "/v1/topics/orders-new/ack?receipt_handle=0:0:1"},
		} {
			rec := env.do(rq.method, rq.path, "alice", []byte("x"))
			if rq.method == "GET" {
				rec = env.do(rq.method, rq.path, "alice", nil)
			}
			if rec.Code != want {
				t.Fatalf("replica current=%v: %s %s = %d, want %d (%s)", current, rq.method, rq.path, rec.Code, want, rec.Body)
			}
			expectJSONError(t, rec)
		}
	}
}
