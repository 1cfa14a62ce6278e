package rpc

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/testwait"
)

// listFSM records applied commands.
type listFSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return len(f.cmds)
}

func (f *listFSM) has(cmd string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.cmds {
		if c == cmd {
			return true
		}
	}
	return false
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (f *listFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (nopSnapshot) Release()                             {}

// Raft and gRPC share each node's cluster port: three nodes on 127.0.0.1/2/3 elect a leader
// over their muxes, replicate an Apply, and answer gRPC on the same address meanwhile, in
// plaintext and under mutual TLS.
func TestRaftAndGRPCShareClusterPort(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) { runSharedPortCluster(t, nil) })
	t.Run("mutual TLS", func(t *testing.T) { runSharedPortCluster(t, newTestPKI(t).node(t)) })
}

// runSharedPortCluster runs TestRaftAndGRPCShareClusterPort with cluster TLS ct (nil: none).
func runSharedPortCluster(t *testing.T, ct *ClusterTLS) {
	secret := []byte("cluster-secret")
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	nodes := make([]*testNode, len(ips))
	rafts := make([]*raft.Raft, len(ips))
	fsms := make([]*listFSM, len(ips))
	var servers []raft.Server
	for i, ip := range ips {
		nodes[i] = startNode(t, ip, secret, 0, WithTLS(ct))
		servers = append(servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(fmt.Sprintf("n%d", i)),
			Address:  raft.ServerAddress(nodes[i].addr),
		})
	}
	for i, n := range nodes {
		sl, err := NewStreamLayer(n.mux, n.addr)
		if err != nil {
			t.Fatal(err)
		}
		cfg := raft.DefaultConfig()
		cfg.LocalID = servers[i].ID
		cfg.HeartbeatTimeout = 300 * time.Millisecond
		cfg.ElectionTimeout = 300 * time.Millisecond
		cfg.LeaderLeaseTimeout = 150 * time.Millisecond
		cfg.CommitTimeout = 10 * time.Millisecond
		cfg.Logger = newHCLogger(nil, "raft")
		store := raft.NewInmemStore()
		fsms[i] = &listFSM{}
		r, err := raft.NewRaft(cfg, fsms[i], store, store, raft.NewInmemSnapshotStore(), NewRaftTransport(sl, nil))
		if err != nil {
			t.Fatal(err)
		}
		rafts[i] = r
		// Registered after startNode's cleanup, so it runs first: raft stops before its mux.
		t.Cleanup(func() {
			if err := r.Shutdown().Error(); err != nil {
				t.Errorf("raft shutdown: %v", err)
			}
		})
	}
	if err := rafts[0].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}

	applyOnLeader(t, rafts, "hello")

	pool := NewPool(secret, WithTLS(ct))
	defer pool.Close()
	for i, n := range nodes {
		c, err := pool.Client(n.addr)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := c.NodeStatus(context.Background(), &nodepb.NodeStatusRequest{})
		if err != nil || rep.GetStatus() != 200 {
			t.Fatalf("node %d gRPC on the raft port: %v %v", i, rep, err)
		}
	}
	for i, f := range fsms {
		testwait.For(t, 10*time.Second, fmt.Sprintf("node %d to apply", i), func() bool { return f.has("hello") })
	}
	// Raft still works after the gRPC traffic: a second entry replicates everywhere too.
	applyOnLeader(t, rafts, "again")
	for i, f := range fsms {
		testwait.For(t, 10*time.Second, fmt.Sprintf("node %d to apply again", i), func() bool { return f.has("again") })
	}
}

// applyOnLeader applies cmd on whichever node leads, retrying across elections (a loaded
// test box can make a 300 ms election timeout flap) until 15 s pass.
func applyOnLeader(t *testing.T, rafts []*raft.Raft, cmd string) {
	t.Helper()
	var lastErr error
	testwait.For(t, 15*time.Second, "an elected leader to apply "+cmd, func() bool {
		for _, r := range rafts {
			if r.State() == raft.Leader {
				lastErr = r.Apply([]byte(cmd), 5*time.Second).Error()
				return lastErr == nil
			}
		}
		return false
	})
	if lastErr != nil {
		t.Fatalf("apply %s: %v", cmd, lastErr)
	}
}
