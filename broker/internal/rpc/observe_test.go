package rpc

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"narad.dev/broker/internal/rpc/nodepb"
)

// callLog records what a WithCallObserver function was given.
type callLog struct {
	mu    sync.Mutex
	calls map[string][]time.Duration
}

func (l *callLog) observe(method string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[method] = append(l.calls[method], d)
}

func (l *callLog) get(method string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[method]
}

func TestServedCallsAreObservedByMethodUnaryAndStreamed(t *testing.T) {
	secret := []byte("s3cret")
	log := &callLog{calls: map[string][]time.Duration{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeOn(t, ln, secret, 0, &stubNode{statusDelay: 20 * time.Millisecond}, WithCallObserver(log.observe))
	p := NewPool(secret)
	defer p.Close()
	c, err := p.Client(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// A stream the stub does not implement still runs its handler (which answers
	// Unimplemented) and is observed once, when it ends.
	st, err := c.WatchCommits(context.Background(), &nodepb.WatchCommitsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("WatchCommits on the stub: %v, want Unimplemented", err)
	}
	// A method the service does not have never reaches the observer.
	p.mu.Lock()
	pc := p.conns[n.addr]
	p.mu.Unlock()
	err = pc.Invoke(context.Background(), "/narad.node.v1.Node/NoSuchMethod", &nodepb.NodeStatusRequest{}, &nodepb.NodeStatusReply{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v, want Unimplemented", err)
	}

	deadline := time.Now().Add(5 * time.Second)
	for len(log.get("WatchCommits")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // a stream's observation follows its end on the server
	}
	if got := log.get("NodeStatus"); len(got) != 2 || got[0] < 20*time.Millisecond || got[1] < 20*time.Millisecond {
		t.Fatalf("NodeStatus observed %v, want two calls of at least the handler's 20 ms", got)
	}
	if got := log.get("WatchCommits"); len(got) != 1 {
		t.Fatalf("WatchCommits observed %v, want one stream", got)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.calls) != 2 {
		t.Fatalf("observed methods %v, want only NodeStatus and WatchCommits", log.calls)
	}
}
