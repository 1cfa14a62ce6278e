package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/meta"
)

// followerStore opens a two-voter metastore pair on in-memory transports where "a" leads and
// returns "b", a follower that knows a as its leader.
func followerStore(t *testing.T) *meta.Store {
	t.Helper()
	ids := []string{"a", "b"}
	trans := map[string]*raft.InmemTransport{}
	for _, id := range ids {
		_, trans[id] = raft.NewInmemTransport(raft.ServerAddress(id))
	}
	trans["a"].Connect("b", trans["b"])
	trans["b"].Connect("a", trans["a"])
	t.Cleanup(func() {
		for _, tr := range trans {
			_ = tr.Close()
		}
	})
	servers := []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: "a"}, {Suffrage: raft.Voter, ID: "b", Address: "b"}}
	stores := map[string]*meta.Store{}
	for _, id := range ids {
		rc := func(c *raft.Config) { // b never starts an election
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, 50*time.Millisecond
			c.CommitTimeout = 5 * time.Millisecond
		}
		if id == "a" {
			rc = fastRaft
		}
		s, err := meta.Open(meta.Config{Dir: t.TempDir(), NodeID: id, Transport: trans[id], RaftConfig: rc,
			Bootstrap: true, BootstrapServers: servers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[id] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stores["b"].WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if id, _ := stores["b"].Leader(); id != "a" {
		t.Fatalf("b's leader = %q, want a", id)
	}
	return stores["b"]
}

// A forwarded write refused with ErrNotLeader waits before trying again; a context that ends
// during that wait ends forwardWrite with the context's error, without another try.
func TestForwardWriteRetryWaitEndsWithTheContext(t *testing.T) {
	e := &Engine{meta: followerStore(t), peers: &fakePeers{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tries := 0
	forwarded, err := e.forwardWrite(ctx, func(addr string) (uint64, error) {
		tries++
		cancel() // the client goes away while leadership moves
		return 0, fmt.Errorf("forwarded to %s: %w", addr, meta.ErrNotLeader)
	})
	if !errors.Is(err, context.Canceled) || !forwarded {
		t.Fatalf("forwardWrite = (%v, %v), want (true, context.Canceled)", forwarded, err)
	}
	if tries != 1 {
		t.Fatalf("fn tried %d times after its context ended, want 1", tries)
	}
}

// Without a cancelled context, a leader that keeps answering ErrNotLeader is tried
// forwardWriteTries times, then the write fails with ErrNoLeader.
func TestForwardWriteGivesUpAfterItsTries(t *testing.T) {
	e := &Engine{meta: followerStore(t), peers: &fakePeers{}}
	tries := 0
	forwarded, err := e.forwardWrite(context.Background(), func(string) (uint64, error) {
		tries++
		return 0, meta.ErrNotLeader
	})
	if !errors.Is(err, meta.ErrNoLeader) || !forwarded || tries != forwardWriteTries {
		t.Fatalf("forwardWrite = (%v, %v) after %d tries, want (true, ErrNoLeader) after %d", forwarded, err, tries, forwardWriteTries)
	}
}
