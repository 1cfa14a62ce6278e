package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"narad.dev/broker/client"
	"narad.dev/broker/internal/config"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/testutil/pki"
)

// clusterConfig resolves a cluster node's configuration: its own loopback address, the shared
// secret, security off, short heartbeats; join lists the cluster addresses to join ("" =
// bootstrap).
func clusterConfig(t *testing.T, id, host, join string, extra ...string) config.Serve {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.Register(fs)
	args := []string{"--data-dir", t.TempDir(), "--node-id", id, "--security-enabled=false",
		"--http-addr", host + ":0", "--cluster-addr", host + ":0", "--log-format", "json",
		"--max-consume-wait", "5s", "--shutdown-grace", "5s",
		"--heartbeat-interval", "500ms", "--heartbeat-timeout", "3s"}
	args = append(args, extra...)
	if join == "" {
		args = append(args, "--bootstrap")
	} else {
		args = append(args, "--join", join)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs, func(k string) string {
		if k == "NARAD_CLUSTER_SECRET" {
			return "test-cluster-secret"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startCluster runs three nodes in this process: n1 bootstraps, n2 and n3 join.
func startCluster(t *testing.T) []*runningNode {
	t.Helper()
	n1 := startRun(t, clusterConfig(t, "n1", "127.0.0.21", ""))
	join, ok := n1.logs.field("narad ready", "cluster")
	if !ok {
		t.Fatal("n1 logged no cluster address")
	}
	n2 := startRun(t, clusterConfig(t, "n2", "127.0.0.22", join))
	n3 := startRun(t, clusterConfig(t, "n3", "127.0.0.23", join))
	nodes := []*runningNode{n1, n2, n3}
	testwait.For(t, 30*time.Second, "three alive voters", func() bool {
		l, err := n3.c.ClusterMembers(context.Background())
		if err != nil || len(l.Members) != 3 || l.Leader != "n1" || !l.LeaderReachable {
			return false
		}
		for _, m := range l.Members {
			if m.Status != client.StatusAlive || m.RaftRole != "voter" {
				return false
			}
		}
		return true
	})
	return nodes
}

func TestJoinedFollowersForwardWritesAndRouteDataToOwners(t *testing.T) {
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A create on a follower is forwarded to the leader and visible on the follower at once.
	if _, err := nodes[2].c.CreateTopic(ctx, client.CreateTopicRequest{Name: "spread", Partitions: 6}); err != nil {
		t.Fatalf("create on a follower: %v", err)
	}
	d, err := nodes[2].c.GetTopic(ctx, "spread", nil)
	if err != nil {
		t.Fatalf("describe right after a forwarded create on the same follower: %v", err)
	}
	owners := map[string]int{}
	for _, p := range d.PartitionStats {
		owners[p.OwnerNode]++
		if !p.Available {
			t.Fatalf("partition %d on %s reported unavailable with every node up", p.Index, p.OwnerNode)
		}
	}
	if owners["n1"] != 2 || owners["n2"] != 2 || owners["n3"] != 2 {
		t.Fatalf("placement %v; want two partitions on each live node", owners)
	}
	// A topic created through one node is never denied by another a moment later: a follower
	// whose replica lags asks the leader before it answers 404.
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("instant-%d", i)
		if _, err := nodes[i%3].c.CreateTopic(ctx, client.CreateTopicRequest{Name: name, Partitions: 3}); err != nil {
			t.Fatal(err)
		}
		for j := 1; j <= 2; j++ {
			other := nodes[(i+j)%3]
			if err := other.c.Produce(ctx, name, []byte("x"), client.ProduceOptions{}); err != nil {
				t.Fatalf("produce to %s on another node right after its create: %v", name, err)
			}
		}
	}
	if _, err := nodes[1].c.GetTopic(ctx, "never-created", nil); !client.IsStatus(err, 404) {
		t.Fatalf("describe of a topic nobody created: %v, want 404", err)
	}

	// A user created on a follower is forwarded too (a plain metastore command).
	if _, err := nodes[1].c.CreateUser(ctx, client.CreateUserRequest{Username: "alice", Password: "correct-horse-battery"}); err != nil {
		t.Fatalf("create user on a follower: %v", err)
	}

	// Produce on every node; consume everything from one node; ack through another.
	want := map[string]bool{}
	for i := 0; i < 30; i++ {
		body := fmt.Sprintf("m%02d", i)
		want[body] = true
		if err := nodes[i%3].c.Produce(ctx, "spread", []byte(body), client.ProduceOptions{}); err != nil {
			t.Fatalf("produce on n%d: %v", i%3+1, err)
		}
	}
	got := map[string]bool{}
	for len(got) < len(want) {
		msgs, err := nodes[1].c.Consume(ctx, "spread", client.ConsumeOptions{Wait: 3 * time.Second, Max: 10})
		if err != nil {
			t.Fatalf("consume on n2: %v", err)
		}
		if len(msgs) == 0 {
			t.Fatalf("consume on n2 came back empty with %d of %d messages seen", len(got), len(want))
		}
		for _, m := range msgs {
			b, err := m.Bytes()
			if err != nil || !want[string(b)] {
				t.Fatalf("consumed %q (%v), never produced", m.Payload, err)
			}
			got[string(b)] = true
			if err := nodes[0].c.Ack(ctx, "spread", m.ReceiptHandle); err != nil {
				t.Fatalf("ack of %s (partition %d) on n1: %v", m.Payload, m.Partition, err)
			}
		}
	}
	// Every lease was settled: nothing comes back after the acks.
	msgs, err := nodes[2].c.Consume(ctx, "spread", client.ConsumeOptions{Wait: 500 * time.Millisecond})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("after acking everything, consume = %v, %v", msgs, err)
	}
}

func TestLongPollOnOneNodeWakesForACommitOnAnother(t *testing.T) {
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := nodes[0].c.CreateTopic(ctx, client.CreateTopicRequest{Name: "wake", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	// Partition 1 is n2's; the consumer waits on n1, whose own partition stays empty.
	testwait.For(t, 10*time.Second, "n2 to know the topic", func() bool {
		_, err := nodes[1].c.GetTopic(ctx, "wake", nil)
		return err == nil
	})
	got := make(chan []client.Message, 1)
	go func() {
		msgs, _ := nodes[0].c.Consume(ctx, "wake", client.ConsumeOptions{Wait: 5 * time.Second})
		got <- msgs
	}()
	time.Sleep(300 * time.Millisecond) // let the long-poll park
	p := 1
	start := time.Now()
	if err := nodes[1].c.Produce(ctx, "wake", []byte("hello"), client.ProduceOptions{Partition: &p}); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-got:
		if len(msgs) != 1 || string(msgs[0].Payload) != `"hello"` || msgs[0].Partition != 1 {
			t.Fatalf("long-poll returned %+v", msgs)
		}
		t.Logf("queue long-poll on n1 served a commit on n2 %v after the produce", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll on n1 never returned")
	}
}

func TestMutualTLSClusterServesHTTPSAndRefusesAPeerWithAForeignCertificate(t *testing.T) {
	hosts := []string{"127.0.0.31", "127.0.0.32", "127.0.0.33"}
	p, err := pki.Write(t.TempDir(), hosts)
	if err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--tls-cert", p.NodeCertFile, "--tls-key", p.NodeKeyFile, "--cluster-tls-ca", p.CAFile}
	n1 := startRun(t, clusterConfig(t, "n1", hosts[0], "", tlsArgs...))
	join, _ := n1.logs.field("narad ready", "cluster")
	n2 := startRun(t, clusterConfig(t, "n2", hosts[1], join, tlsArgs...))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Data crosses the cluster port over mutual TLS: a create forwarded from n2, a produce
	// accepted on n2 for n1's partition, consumed through n2.
	if _, err := n2.c.CreateTopic(ctx, client.CreateTopicRequest{Name: "secure", Partitions: 3}); err != nil {
		t.Fatalf("create over https on a follower: %v", err)
	}
	p0 := 0
	if err := n2.c.Produce(ctx, "secure", []byte("sealed"), client.ProduceOptions{Partition: &p0}); err != nil {
		t.Fatal(err)
	}
	msgs, err := n2.c.Consume(ctx, "secure", client.ConsumeOptions{Wait: 5 * time.Second, Partition: &p0})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("consume of n1's partition through n2: %v, %v", msgs, err)
	}

	// A node whose certificate another CA signed is never admitted: the leader's TLS refuses
	// its join call, so its Raft never sees a leader and it never becomes ready.
	rogueArgs := []string{"--tls-cert", p.RogueCertFile, "--tls-key", p.RogueKeyFile, "--cluster-tls-ca", p.RogueCAFile}
	rcfg := clusterConfig(t, "rogue", hosts[2], join, rogueArgs...)
	rctx, rcancel := context.WithCancel(context.Background())
	logs := &logBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(rctx, rcfg, logs) }()
	time.Sleep(5 * time.Second) // two join rounds
	rcancel()
	<-done
	if _, ok := logs.field("narad ready", "http"); ok {
		t.Fatal("a node with a foreign certificate became ready")
	}
	l, err := n1.c.ClusterMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range l.Members {
		if m.ID == "rogue" {
			t.Fatalf("the rogue node was admitted: %+v", m)
		}
	}
}

func TestNodeDownDuringADeletePurgesTheTopicWhenItReturns(t *testing.T) {
	n1 := startRun(t, clusterConfig(t, "n1", "127.0.0.41", ""))
	join, _ := n1.logs.field("narad ready", "cluster")
	n2 := startRun(t, clusterConfig(t, "n2", "127.0.0.42", join))
	cfg3 := clusterConfig(t, "n3", "127.0.0.43", join)
	n3 := startRun(t, cfg3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testwait.For(t, 20*time.Second, "three alive members", func() bool {
		l, err := n1.c.ClusterMembers(ctx)
		return err == nil && len(l.Members) == 3
	})
	if _, err := n2.c.CreateTopic(ctx, client.CreateTopicRequest{Name: "doomed", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	p2 := 2 // n3's partition (candidates n1, n2, n3)
	if err := n1.c.Produce(ctx, "doomed", []byte("x"), client.ProduceOptions{Partition: &p2}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cfg3.DataDir, "topics", "doomed")
	testwait.For(t, 10*time.Second, "n3 to store its partition", func() bool {
		_, err := os.Stat(filepath.Join(dir, "p00002"))
		return err == nil
	})
	if err := n3.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := n1.c.DeleteTopic(ctx, "doomed"); err != nil {
		t.Fatalf("delete with one of three nodes down: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("n3's data vanished while it was down: %v", err)
	}
	startRun(t, cfg3) // same id, same data
	testwait.For(t, 20*time.Second, "n3 to purge the deleted topic's data", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}

func TestMemberHTTPAddressUsesTheAdvertisedHostAndTheHTTPPort(t *testing.T) {
	cases := []struct{ advertise, bound, want string }{
		{"narad-0.narad.svc:7943", "[::]:7942", "narad-0.narad.svc:7942"},
		{"", "127.0.0.5:8000", "127.0.0.5:8000"},
	}
	for _, tc := range cases {
		if got := httpAdvertise(tc.advertise, tc.bound); got != tc.want {
			t.Fatalf("httpAdvertise(%q, %q) = %q, want %q", tc.advertise, tc.bound, got, tc.want)
		}
	}
}

func TestFanoutAcrossNodesCopiesEveryParentRecordIntoEveryChild(t *testing.T) {
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := nodes[0].c.CreateTopic(ctx, client.CreateTopicRequest{Name: "src", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ { // before the attach: never copied
		if err := nodes[i%3].c.Produce(ctx, "src", []byte(fmt.Sprintf("old-%d", i)), client.ProduceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A 202 means accepted, not yet committed at the owner: the attach point is the committed
	// tail, so wait until the old records are committed before attaching.
	testwait.For(t, 20*time.Second, "the old records to be committed", func() bool {
		d, err := nodes[0].c.GetTopic(ctx, "src", nil)
		if err != nil {
			return false
		}
		var sum int64
		for _, ps := range d.PartitionStats {
			sum += ps.HighWatermark
		}
		return sum == 10
	})
	// One child attached through a follower, one created with parent (placed away from the
	// parent's owners).
	if _, err := nodes[1].c.CreateTopic(ctx, client.CreateTopicRequest{Name: "copy-a", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[2].c.Attach(ctx, "src", "copy-a", 0); err != nil {
		t.Fatalf("attach through a follower: %v", err)
	}
	if _, err := nodes[2].c.CreateTopic(ctx, client.CreateTopicRequest{Name: "copy-b", Partitions: 3, Parent: "src"}); err != nil {
		t.Fatalf("create with parent: %v", err)
	}
	pd, _ := nodes[0].c.GetTopic(ctx, "src", nil)
	cd, _ := nodes[0].c.GetTopic(ctx, "copy-b", nil)
	for p := range 3 {
		if pd.PartitionStats[p].OwnerNode == cd.PartitionStats[p].OwnerNode {
			t.Fatalf("child partition %d placed with its parent partition on %s", p, cd.PartitionStats[p].OwnerNode)
		}
	}
	want := map[string]bool{}
	for i := 0; i < 30; i++ {
		body := fmt.Sprintf("new-%02d", i)
		want[body] = true
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("k%d", i)
		}
		if err := nodes[i%3].c.Produce(ctx, "src", []byte(body), client.ProduceOptions{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	for _, child := range []string{"copy-a", "copy-b"} {
		got := map[string]bool{}
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < len(want) && time.Now().Before(deadline) {
			msgs, err := nodes[1].c.Consume(ctx, child, client.ConsumeOptions{Wait: 2 * time.Second, Max: 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				b, _ := m.Bytes()
				if !want[string(b)] {
					t.Fatalf("%s received %q, which was produced before the attach or never", child, b)
				}
				got[string(b)] = true
				_ = nodes[1].c.Ack(ctx, child, m.ReceiptHandle)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s received %d of %d parent records", child, len(got), len(want))
		}
	}
	testwait.For(t, 20*time.Second, "the children listing to show both children caught up", func() bool {
		l, err := nodes[2].c.Children(ctx, "src")
		if err != nil || len(l.Children) != 2 {
			return false
		}
		for _, c := range l.Children {
			if c.State != "active" || !c.LagComplete || c.LagMessages != 0 || len(c.Cursors) != 3 {
				return false
			}
		}
		return true
	})
}
