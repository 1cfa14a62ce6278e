package rpc

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// freeAddr returns a loopback address nothing listens on (a port just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A Raft dial to a peer whose port is not open yet keeps trying, and connects once the peer
// listens: a restarted node is reached as it comes up, not after Raft's backoff from a run of
// refused dials (docs/internals/metastore.md §2).
func TestRaftDialWaitsForAPeerToComeUp(t *testing.T) {
	secret := []byte("s3cret")
	a := startNode(t, "127.0.0.1", secret, 0)
	sl, err := NewStreamLayer(a.mux, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	up := make(chan struct{})
	go func() {
		defer close(up)
		time.Sleep(3 * raftRedialEvery)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen %s again: %v", addr, err)
			return
		}
		b := startNodeOn(t, ln, secret, 0, nil)
		bsl, err := NewStreamLayer(b.mux, addr)
		if err != nil {
			t.Error(err)
			return
		}
		acceptInto(bsl)
	}()
	conn, err := sl.Dial(raft.ServerAddress(addr), 30*time.Second)
	<-up
	if err != nil {
		t.Fatalf("dial to a peer that came up while dialing: %v", err)
	}
	conn.Close()
}

// The wait for a peer that stays down ends with the dial's timeout, with StopDialWaits and
// with the mux's Close, each with the refusal as the error.
func TestRaftDialWaitEnds(t *testing.T) {
	secret := []byte("s3cret")
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		stop    func(sl *StreamLayer, n *testNode)
	}{
		{"timeout", 5 * raftRedialEvery, nil},
		{"StopDialWaits", time.Hour, func(sl *StreamLayer, _ *testNode) { sl.StopDialWaits() }},
		{"mux closed", time.Hour, func(_ *StreamLayer, n *testNode) { n.mux.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "127.0.0.1", secret, 0)
			sl, err := NewStreamLayer(n.mux, n.addr)
			if err != nil {
				t.Fatal(err)
			}
			addr := freeAddr(t)
			if tc.stop != nil {
				time.AfterFunc(3*raftRedialEvery, func() { tc.stop(sl, n) })
			}
			done := make(chan error, 1)
			go func() {
				_, err := sl.Dial(raft.ServerAddress(addr), tc.timeout)
				done <- err
			}()
			select {
			case err := <-done:
				if !peerDown(err) {
					t.Fatalf("dial ended with %v, want the refusal", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("the dial still waits for a peer that stays down")
			}
		})
	}
}
