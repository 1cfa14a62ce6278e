package noderpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/log"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
)

// replicaLoopback serves a Service whose replica host is host on a real cluster port, and
// returns a Peers whose connections claim node ID self.
func replicaLoopback(t testing.TB, host ReplicaHost, self string) (string, Peers) {
	t.Helper()
	return replicaLoopbackServing(t, NewService(Deps{Replicas: host}), self)
}

// replicaLoopbackServing is replicaLoopback serving impl, with opts for its server.
func replicaLoopbackServing(t testing.TB, impl nodepb.NodeServer, self string, opts ...rpc.Option) (string, Peers) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := rpc.NewMux(ln, loopSecret, nil)
	srv := rpc.NewServer(loopSecret, impl, nil, opts...)
	go func() { _ = srv.Serve(mux) }()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- mux.Run(ctx) }()
	pool := rpc.NewPool(loopSecret, rpc.WithNodeID(self))
	t.Cleanup(func() {
		_ = pool.Close()
		srv.Stop()
		cancel()
		_ = mux.Close()
		<-ran
	})
	return ln.Addr().String(), Peers{pool: pool}
}

type replicaNode struct {
	log    *log.Log
	epochs *log.Epochs
}

func openReplicaNode(t testing.TB) replicaNode {
	t.Helper()
	dir := t.TempDir()
	l, err := log.Open(dir, log.Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e, err := log.OpenEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return replicaNode{log: l, epochs: e}
}

// A follower catches up with a leader over real node RPC (ops 37, 35): the same records at
// the same offsets, the leader's HWM waits for it, and it learns the HWM.
func TestFollowerCatchesUpOverNodeRPC(t *testing.T) {
	host, leader := leadingHost(t, 0, 0)
	follower := openReplicaNode(t)
	addr, peers := replicaLoopback(t, host, "b")

	var end int64
	for i := range 30 {
		_, leo, err := leader.log.Append([]log.Entry{{Key: []byte(fmt.Sprint("k", i)), Payload: make([]byte, 200)}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		end = leo
	}
	fw := &replica.Follower{Self: "b", Epoch: 3, Log: follower.log, Epochs: follower.epochs,
		Source: peers.ReplicaSource(addr, "orders", 0, "inc1", 50*time.Millisecond), MaxBytes: 1000}
	ctx := context.Background()
	if err := fw.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if follower.log.HighWatermark() == end {
			break
		}
		if err := fw.FetchOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if leader.log.HighWatermark() != end || follower.log.HighWatermark() != end {
		t.Fatalf("hwm leader %d follower %d, want %d", leader.log.HighWatermark(), follower.log.HighWatermark(), end)
	}
	for off := range end {
		a, _ := leader.log.Read(off)
		b, err := follower.log.Read(off)
		if err != nil || string(a.Key) != string(b.Key) {
			t.Fatalf("offset %d: %q vs %q (%v)", off, a.Key, b.Key, err)
		}
	}
	if got := follower.epochs.Entries(); len(got) != 1 || got[0] != (log.EpochEntry{Epoch: 3, Start: 0}) {
		t.Fatalf("follower epochs %v", got)
	}

	// A parked fetch wakes when the leader appends.
	done := make(chan error, 1)
	slow := &replica.Follower{Self: "b", Epoch: 3, Log: follower.log, Epochs: follower.epochs,
		Source: peers.ReplicaSource(addr, "orders", 0, "inc1", 10*time.Second)}
	go func() { done <- slow.FetchOnce(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if _, _, err := leader.log.Append([]log.Entry{{Payload: []byte("late")}}, 8); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || follower.log.NextOffset() != end+1 {
			t.Fatalf("woken fetch: %v, follower at %d", err, follower.log.NextOffset())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a parked fetch did not wake on an append")
	}
}

func TestReplicaOpsRefuseWithTheirSentinels(t *testing.T) {
	leader := openReplicaNode(t)
	ld, err := replica.NewLeader(replica.LeaderConfig{Self: "a", Epoch: 5, Replicas: []string{"a", "b"},
		ISR: []string{"a", "b"}, MinISR: 1, Log: leader.log})
	if err != nil {
		t.Fatal(err)
	}
	host := replica.NewHost()
	host.Lead("orders", 0, "inc1", ld, leader.log, leader.epochs)
	addr, peers := replicaLoopback(t, host, "b")
	ctx := context.Background()
	fetch := func(topic, inc string, epoch uint64, off int64) error {
		_, err := peers.ReplicaSource(addr, topic, 0, inc, 0).Fetch(ctx, replica.FetchRequest{Epoch: epoch, Offset: off})
		return err
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"stale epoch", fetch("orders", "inc1", 4, 0), errcode.ErrStaleEpoch},
		{"newer epoch", fetch("orders", "inc1", 6, 0), errcode.ErrStaleEpoch},
		{"not led here", fetch("payments", "inc1", 5, 0), errcode.ErrNotOwner},
		{"other incarnation", fetch("orders", "inc2", 5, 0), errcode.ErrNotFound},
		{"past the end", fetch("orders", "inc1", 5, 9), errcode.ErrInvalid},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	_, _, _, err = peers.ReplicaSource(addr, "orders", 0, "inc1", 0).EndOffset(ctx, 4, 1)
	if !errors.Is(err, errcode.ErrStaleEpoch) {
		t.Fatalf("end offset under a stale epoch: %v", err)
	}
	if _, _, ok, err := peers.ReplicaSource(addr, "orders", 0, "inc1", 0).EndOffset(ctx, 5, 1); err != nil || ok {
		t.Fatalf("end offset of an unknown epoch: ok %v, %v", ok, err)
	}

	// A node without a replica host leads nothing.
	addr2, peers2 := replicaLoopback(t, nil, "b")
	if _, err := peers2.ReplicaSource(addr2, "orders", 0, "inc1", 0).Fetch(ctx, replica.FetchRequest{Epoch: 5}); !errors.Is(err, errcode.ErrNotOwner) {
		t.Fatalf("fetch from a node with no host: %v", err)
	}
}

// belowStart is a HostLog whose oldest retained offset is 100.
type belowStart struct{ *log.Log }

func (belowStart) OldestOffset() int64 { return 100 }
func (belowStart) ReadFrames(int64, int) ([]byte, int64, error) {
	return nil, 0, log.ErrOffsetOutOfRange
}
func (belowStart) ReadFramesAppend([]byte, int64, int) ([]byte, int64, error) {
	return nil, 0, log.ErrOffsetOutOfRange
}

func TestAFetchBelowTheLeadersLogStartSaysWhereItStarts(t *testing.T) {
	leader := openReplicaNode(t)
	lg := belowStart{leader.log}
	ld, err := replica.NewLeader(replica.LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b"},
		ISR: []string{"a"}, MinISR: 1, Log: lg})
	if err != nil {
		t.Fatal(err)
	}
	host := replica.NewHost()
	host.Lead("orders", 0, "inc1", ld, lg, leader.epochs)
	addr, peers := replicaLoopback(t, host, "b")
	_, err = peers.ReplicaSource(addr, "orders", 0, "inc1", 0).Fetch(context.Background(), replica.FetchRequest{Epoch: 1})
	var below *replica.BelowLogStartError
	if !errors.As(err, &below) || below.LogStart != 100 || !errors.Is(err, errcode.ErrGone) {
		t.Fatalf("fetch below the log start: %v", err)
	}
}
