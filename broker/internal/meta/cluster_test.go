package meta

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// storeForwarder is the in-process Forwarder: it calls the leader store's ApplyCommand
// directly and ships the Result through JSON, as node RPC does.
type storeForwarder struct {
	mu        sync.Mutex
	stores    map[string]*Store
	err       error // every call fails with it (a transport failure)
	notLeader int   // the next notLeader calls answer ErrNotLeader
	calls     int
}

func (f *storeForwarder) Forward(ctx context.Context, id, addr string, cmd []byte) (Result, uint64, error) {
	f.mu.Lock()
	f.calls++
	err, st := f.err, f.stores[id]
	if f.notLeader > 0 {
		f.notLeader--
		err = ErrNotLeader
	}
	f.mu.Unlock()
	if err != nil {
		return Result{}, 0, err
	}
	if st == nil {
		return Result{}, 0, errors.New("unknown node " + id)
	}
	res, index, err := st.ApplyCommand(ctx, cmd)
	if err != nil {
		return Result{}, 0, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return Result{}, 0, err
	}
	var shipped Result
	if err := json.Unmarshal(raw, &shipped); err != nil {
		return Result{}, 0, err
	}
	return shipped, index, nil
}

func (f *storeForwarder) set(fn func(f *storeForwarder)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func (f *storeForwarder) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// testCluster is a set of in-process stores on connected in-memory transports.
type testCluster struct {
	stores map[string]*Store
	trans  map[string]*raft.InmemTransport
	fwd    *storeForwarder
}

// openCluster starts voters[0] as the leader (fast timeouts) and the other voters as
// followers that never start an election of their own (long timeouts), all bootstrapped
// with the same voter configuration; joiners start join-only (no bootstrap). Every store
// forwards through one storeForwarder.
func openCluster(t *testing.T, voters []string, joiners ...string) *testCluster {
	t.Helper()
	c := &testCluster{stores: map[string]*Store{}, trans: map[string]*raft.InmemTransport{},
		fwd: &storeForwarder{stores: map[string]*Store{}}}
	all := append(append([]string{}, voters...), joiners...)
	for _, id := range all {
		_, c.trans[id] = raft.NewInmemTransport(raft.ServerAddress(id))
	}
	for _, a := range all {
		for _, b := range all {
			if a != b {
				c.trans[a].Connect(raft.ServerAddress(b), c.trans[b])
			}
		}
	}
	t.Cleanup(func() {
		for _, tr := range c.trans {
			_ = tr.Close()
		}
	})
	var servers []raft.Server
	for _, id := range voters {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
	}
	slow := func(rc *raft.Config) {
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, 50*time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
	}
	for i, id := range all {
		cfg := Config{Dir: t.TempDir(), NodeID: id, Transport: c.trans[id], RaftConfig: slow, Forwarder: c.fwd}
		if i < len(voters) {
			cfg.Bootstrap, cfg.BootstrapServers = true, servers
		}
		if i == 0 {
			cfg.RaftConfig = fastRaft
		}
		s, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		c.stores[id] = s
		c.fwd.set(func(f *storeForwarder) { f.stores[id] = s })
	}
	ctx := ctxT(t)
	for _, id := range voters {
		if err := c.stores[id].WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !c.stores[voters[0]].IsLeader() {
		t.Fatalf("%s did not become the leader", voters[0])
	}
	return c
}
