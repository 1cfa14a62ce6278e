package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/testwait"
)

// joinMembers adds live member records for ids (nodes that never run: their replicas never fetch).
func joinMembers(t *testing.T, n *testNode, ids ...string) {
	t.Helper()
	for i, id := range ids {
		if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 30+i),
			ClusterAddr: fmt.Sprintf("127.0.0.1:%d", 40+i), Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
			t.Fatal(err)
		}
	}
}

// ledBy lists the partitions of topic the local replica names n1 the leader of.
func ledBy(n *testNode, topic string) []meta.Assignment {
	var out []meta.Assignment
	for _, a := range n.store.Assignments(topic) {
		if a.Owner == "n1" {
			out = append(out, a)
		}
	}
	return out
}

// gaugeOf reads the series of v with the label values of names topic, partition[, replica],
// without creating it: present is false when there is none.
func gaugeOf(t *testing.T, v *prometheus.GaugeVec, values ...string) (value float64, present bool) {
	want := map[string]string{}
	for i, name := range []string{"topic", "partition", "replica"}[:len(values)] {
		want[name] = values[i]
	}
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	v.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, lp := range d.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if maps.Equal(got, want) {
			return d.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The replication metrics of docs/internals/metrics.md §8 on a leader: followers that never
// fetch are dropped from the ISR (narad_isr_changes_total{change="shrink"}); the poller shows
// every led partition's replicas and ISR (R = 1 ones as 1/1), each follower's lag and the
// under-replicated totals; a fetch served counts its frame bytes out; a partition whose
// leadership moves away loses its series.
func TestReplicationMetricsFollowTheLeadershipsOfThisNode(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.ReplicaLagMax = 200 * time.Millisecond })
	joinMembers(t, n, "n2", "n3")
	// A topic created in the second the node started counts as older than it (creation times
	// are whole seconds), and n1's empty follower replicas would leave the ISR too: shrinks
	// this test does not count.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	rt := n.createTopic(service.CreateTopicRequest{Name: "r", Partitions: 6, ReplicationFactor: 3,
		MinInsyncReplicas: 1, UncleanLeaderElection: true})
	one := n.createTopic(service.CreateTopicRequest{Name: "one", Partitions: 3, ReplicationFactor: 1})
	led := ledBy(n, rt.Name)
	if len(led) != 2 {
		t.Fatalf("n1 leads %d of 6 partitions, want 2", len(led))
	}
	testwait.For(t, 20*time.Second, "both led partitions shrunk to [n1]", func() bool {
		for _, a := range ledBy(n, rt.Name) {
			if !slices.Equal(a.InSync(), []string{"n1"}) {
				return false
			}
		}
		return true
	})
	// The leader counts a change once its proposal returns, a moment after the metastore shows it.
	testwait.For(t, 5*time.Second, "two isr shrinks counted", func() bool {
		return testutil.ToFloat64(n.m.ISRChanges.WithLabelValues(metrics.ISRShrink)) == 2
	})
	if got := testutil.ToFloat64(n.m.ISRChanges.WithLabelValues(metrics.ISRExpand)); got != 0 {
		t.Fatalf("isr expands counted %v, want 0", got)
	}

	n.e.pollGauges()
	for _, a := range n.store.Assignments(rt.Name) {
		p := metrics.Partition(a.Partition)
		reps, ok := gaugeOf(t, n.m.PartitionReplicas, rt.Name, p)
		isr, _ := gaugeOf(t, n.m.PartitionISR, rt.Name, p)
		switch {
		case a.Owner == "n1" && (!ok || reps != 3 || isr != 1):
			t.Errorf("r/%s led here: replicas %v isr %v (present %v), want 3 and 1", p, reps, isr, ok)
		case a.Owner != "n1" && ok:
			t.Errorf("r/%s led by %s has a series here", p, a.Owner)
		}
	}
	for _, a := range n.store.Assignments(one.Name) {
		reps, ok := gaugeOf(t, n.m.PartitionReplicas, one.Name, metrics.Partition(a.Partition))
		isr, _ := gaugeOf(t, n.m.PartitionISR, one.Name, metrics.Partition(a.Partition))
		if a.Owner == "n1" && (!ok || reps != 1 || isr != 1) || a.Owner != "n1" && ok {
			t.Errorf("one/%d owned by %s: replicas %v isr %v present %v", a.Partition, a.Owner, reps, isr, ok)
		}
	}
	if got := testutil.ToFloat64(n.m.UnderReplicated); got != 2 {
		t.Errorf("under-replicated %v, want 2", got)
	}
	if got := testutil.ToFloat64(n.m.UnderMinISR); got != 0 {
		t.Errorf("under-min-isr %v, want 0 (M = 1)", got)
	}

	// A record on the first led partition: each follower lags by 1; a fetch served counts
	// its frames.
	a0 := led[0]
	n.mustCommit(rt, a0.Partition, "x")
	n.e.pollGauges()
	p0 := metrics.Partition(a0.Partition)
	for _, f := range []string{"n2", "n3"} {
		if lag, ok := gaugeOf(t, n.m.ReplicaLag, rt.Name, p0, f); !ok || lag != 1 {
			t.Errorf("lag of %s on r/%s: %v (present %v), want 1", f, p0, lag, ok)
		}
	}
	out := n.m.ReplicationBytes.WithLabelValues(metrics.ReplicationOut)
	rep, err := n.e.ReplicaHost().Fetch(n.ctx(), rt.Name, a0.Partition, rt.Incarnation,
		replica.FetchRequest{Follower: "n2", Epoch: a0.LeaderEpoch, Offset: 0, MaxBytes: 1 << 20}, time.Second)
	if err != nil || len(rep.Frames) == 0 {
		t.Fatalf("fetch: %d frame bytes, %v", len(rep.Frames), err)
	}
	if got := testutil.ToFloat64(out); got != float64(len(rep.Frames)) {
		t.Fatalf("bytes out %v, want %d", got, len(rep.Frames))
	}

	// Leadership of the second led partition moves to n2: its series go.
	a1 := led[1]
	if res, _, err := n.store.ElectLeader(n.ctx(), rt.Name, a1.Partition, a1.LeaderEpoch, "n2", meta.ElectUnclean); err != nil || res != meta.CASDone {
		t.Fatalf("elect n2: %v %v", res, err)
	}
	n.e.pollGauges()
	p1 := metrics.Partition(a1.Partition)
	if _, ok := gaugeOf(t, n.m.PartitionISR, rt.Name, p1); ok {
		t.Errorf("r/%s still has an isr series after its leadership moved", p1)
	}
	if _, ok := gaugeOf(t, n.m.ReplicaLag, rt.Name, p1, "n3"); ok {
		t.Errorf("r/%s still has a lag series after its leadership moved", p1)
	}
	if got := testutil.ToFloat64(n.m.UnderReplicated); got != 1 {
		t.Errorf("under-replicated %v after the move, want 1", got)
	}
}

// A follower's fetches count the frame bytes they bring in.
func TestAFollowersFetchesCountTheirBytesIn(t *testing.T) {
	in := prometheus.NewCounter(prometheus.CounterOpts{Name: "in"})
	s := meteredSource{Source: fixedSource{frames: []byte("0123456789")}, in: in}
	for range 3 {
		if _, err := s.Fetch(context.Background(), replica.FetchRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(in); got != 30 {
		t.Fatalf("bytes in %v, want 30", got)
	}
}

// fixedSource answers every fetch with the same frames.
type fixedSource struct {
	noPeers
	frames []byte
}

func (f fixedSource) Fetch(context.Context, replica.FetchRequest) (replica.FetchReply, error) {
	return replica.FetchReply{Frames: f.frames}, nil
}
