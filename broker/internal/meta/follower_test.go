package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakeLeaderReader answers confirmed reads as a remote leader would.
type fakeLeaderReader struct {
	leader *Store
	calls  int
	err    error
}

func (f *fakeLeaderReader) ConfirmTopic(ctx context.Context, id, addr, name string) (Topic, bool, error) {
	f.calls++
	if f.err != nil {
		return Topic{}, false, f.err
	}
	t, found, _, err := f.leader.LeaderReadTopic(ctx, name)
	return t, found, err
}

func (f *fakeLeaderReader) ConfirmAssignment(ctx context.Context, id, addr, topic string, p int) (Assignment, bool, error) {
	f.calls++
	a, found, _, err := f.leader.LeaderReadAssignment(ctx, topic, p)
	return a, found, err
}

// openPair starts a two-voter cluster over in-memory transports: "a" leads (fast timeouts);
// "b" never starts an election of its own (long timeouts), so it stays a follower.
func openPair(t *testing.T, reader LeaderReader) (leader, follower *Store, ta, tb *raft.InmemTransport) {
	t.Helper()
	_, ta = raft.NewInmemTransport("a")
	_, tb = raft.NewInmemTransport("b")
	ta.Connect("b", tb)
	tb.Connect("a", ta)
	t.Cleanup(func() { _ = ta.Close(); _ = tb.Close() })
	servers := []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: "a"}, {Suffrage: raft.Voter, ID: "b", Address: "b"}}
	slow := func(c *raft.Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, 50*time.Millisecond
	}
	var err error
	leader, err = Open(Config{Dir: t.TempDir(), NodeID: "a", Transport: ta, Bootstrap: true, BootstrapServers: servers, RaftConfig: fastRaft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leader.Close() })
	follower, err = Open(Config{Dir: t.TempDir(), NodeID: "b", Transport: tb, Bootstrap: true, BootstrapServers: servers,
		RaftConfig: slow, LeaderReader: reader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follower.Close() })
	ctx := ctxT(t)
	for _, s := range []*Store{leader, follower} {
		if err := s.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !leader.IsLeader() || follower.IsLeader() {
		t.Fatal("unexpected leader")
	}
	return leader, follower, ta, tb
}

func TestFollowerBehaviour(t *testing.T) {
	reader := &fakeLeaderReader{}
	leader, follower, _, _ := openPair(t, reader)
	reader.leader = leader
	ctx := ctxT(t)
	if err := leader.CreateTopic(ctx, newTopic("orders", 3), []Assignment{{Partition: 1, Owner: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := leader.Barrier(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("proposal on a follower is no-leader (503) and names raft's error", func(t *testing.T) {
		err := follower.CreateTopic(ctx, newTopic("x1", 3), nil)
		if !errors.Is(err, ErrNoLeader) || !errors.Is(err, raft.ErrNotLeader) {
			t.Fatalf("follower proposal = %v", err)
		}
	})
	t.Run("leader reads on a follower are not-leader (421)", func(t *testing.T) {
		if _, _, _, err := follower.LeaderReadTopic(ctx, "orders"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("LeaderReadTopic on follower = %v", err)
		}
		if err := follower.Barrier(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Barrier on follower = %v", err)
		}
	})
	t.Run("follower confirms through the leader", func(t *testing.T) {
		top, found, err := follower.ConfirmTopic(ctx, "orders")
		if err != nil || !found || top.Name != "orders" || reader.calls == 0 {
			t.Fatalf("ConfirmTopic = %+v %v %v (calls %d)", top, found, err, reader.calls)
		}
		a, found, err := follower.ConfirmAssignment(ctx, "orders", 1)
		if err != nil || !found || a.Owner != "a" {
			t.Fatalf("ConfirmAssignment = %+v %v %v", a, found, err)
		}
		reader.err = errors.New("unreachable")
		if _, _, err := follower.ConfirmTopic(ctx, "orders"); !errors.Is(err, ErrUnconfirmed) {
			t.Fatalf("ConfirmTopic with an unreachable leader = %v, want ErrUnconfirmed", err)
		}
		reader.err = nil
	})
	t.Run("follower replica has the data", func(t *testing.T) {
		if _, ok := follower.Topic("orders"); !ok {
			t.Fatal("follower replica lacks the topic after caught up")
		}
	})
}

func TestFollowerWithoutLeaderReaderIsUnconfirmed(t *testing.T) {
	_, follower, _, _ := openPair(t, nil)
	if _, _, err := follower.ConfirmTopic(ctxT(t), "orders"); !errors.Is(err, ErrUnconfirmed) {
		t.Fatalf("ConfirmTopic without a LeaderReader = %v", err)
	}
}

// CL-5: a follower cut off from the leader stops being caught up once its last contact is
// older than the freshness bound, although its applied index still equals its commit index.
func TestAppliedCaughtUpNeedsFreshLeaderContact(t *testing.T) {
	_, follower, ta, tb := openPair(t, nil)
	follower.contactMax = 300 * time.Millisecond // LeaderContactMax (5 s) shortened for the test
	if !follower.AppliedCaughtUp() {
		t.Fatal("connected follower not caught up")
	}
	ta.DisconnectAll()
	tb.DisconnectAll()
	deadline := time.Now().Add(5 * time.Second)
	for follower.AppliedCaughtUp() {
		if time.Now().After(deadline) {
			t.Fatal("partitioned follower still caught up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if id, _ := follower.Leader(); id != "a" {
		t.Fatalf("follower forgot the leader (%q): the freshness clause was not what flipped it", id)
	}
	if follower.raft.AppliedIndex() < follower.raft.CommitIndex() {
		t.Fatal("follower has unapplied entries: the freshness clause was not what flipped it")
	}
}
