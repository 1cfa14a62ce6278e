package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"

	"narad.dev/broker/internal/credseal"
	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// testClock is an injectable wall clock: real time shifted by an offset the test steps.
type testClock struct{ off atomic.Int64 }

func (c *testClock) Now() time.Time       { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *testClock) Step(d time.Duration) { c.off.Add(int64(d)) }

func fastRaft(c *raft.Config) {
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

// testNode is one single-node broker runtime: a real metastore (in-memory Raft transport),
// the ingress WAL with its dispatcher, and the engine, all on one data dir.
type testNode struct {
	t     testing.TB
	dir   string
	clock *testClock
	m     *metrics.Metrics
	store *meta.Store
	in    *Ingress
	e     *Engine

	stopIn, stopEng context.CancelFunc
	inDone, engDone chan error
	stopped         bool
}

// startNode boots a node on dir (a fresh t.TempDir() or a stopped node's dir). mod adjusts the
// engine config. The node is stopped in t.Cleanup (ingress before engine, then the store).
func startNode(t testing.TB, dir string, mod func(*Config)) *testNode {
	t.Helper()
	n := &testNode{t: t, dir: dir, clock: &testClock{}, m: metrics.New()}
	var eng atomic.Pointer[Engine]
	store, err := meta.Open(meta.Config{
		Dir: filepath.Join(dir, "metastore"), NodeID: "n1", Bootstrap: true, RaftConfig: fastRaft,
		OnApply: func(ev meta.Event) {
			if e := eng.Load(); e != nil {
				e.OnMetaEvent(ev)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.store = store
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := store.WaitCaughtUp(ctx); err != nil {
		store.Close()
		t.Fatal(err)
	}
	if err := store.MemberJoin(ctx, meta.Member{ID: "n1", Addr: "127.0.0.1:1", ClusterAddr: "127.0.0.1:2",
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
		store.Close()
		t.Fatal(err)
	}
	in, err := OpenIngress(filepath.Join(dir, "ingress", "produce"), wal.Options{}, nil, func(w *wal.WAL) *dispatch.Dispatcher {
		return dispatch.New(w, n.e.Topology(), n.e.Committer(nil), dispatch.Options{})
	})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	n.in = in
	cfg := Config{NodeID: "n1", DataDir: dir, Metrics: n.m, Now: n.clock.Now, LinkKey: testLinkKey(t)}
	if mod != nil {
		mod(&cfg)
	}
	n.e = New(cfg, store, in)
	eng.Store(n.e)
	n.e.DispatcherStarted(in.Undispatched)
	n.e.OpenCreateGate()
	n.e.SetReady(true)

	var ectx, ictx context.Context
	ectx, n.stopEng = context.WithCancel(context.Background())
	ictx, n.stopIn = context.WithCancel(context.Background())
	n.engDone, n.inDone = make(chan error, 1), make(chan error, 1)
	go func() { n.engDone <- n.e.Run(ectx) }()
	go func() { n.inDone <- in.Run(ictx) }()
	t.Cleanup(n.stop)
	return n
}

// stop shuts the node down in the production order: ingress (dispatcher + WAL), then the
// engine (closes logs CLEAN, flushes offsets), then the metastore.
func (n *testNode) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	n.stopIn()
	if err := <-n.inDone; err != nil {
		n.t.Errorf("ingress Run: %v", err)
	}
	n.stopEng()
	if err := <-n.engDone; err != nil {
		n.t.Errorf("engine Run: %v", err)
	}
	if err := n.store.Close(); err != nil {
		n.t.Errorf("metastore close: %v", err)
	}
}

func (n *testNode) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	n.t.Cleanup(cancel)
	return ctx
}

func (n *testNode) createTopic(req service.CreateTopicRequest) meta.Topic {
	n.t.Helper()
	t, err := n.e.CreateTopic(n.ctx(), req)
	if err != nil {
		n.t.Fatalf("create %s: %v", req.Name, err)
	}
	return t
}

func (n *testNode) topic(name string) meta.Topic {
	n.t.Helper()
	t, ok := n.e.Topic(name)
	if !ok {
		n.t.Fatalf("topic %s missing", name)
	}
	return t
}

func (n *testNode) produce(t meta.Topic, recs ...service.ProduceRecord) {
	n.t.Helper()
	if err := n.e.Produce(n.ctx(), t, recs); err != nil {
		n.t.Fatalf("produce: %v", err)
	}
}

// replay reads every visible record of (t, p) without touching queue state.
func (n *testNode) replay(t meta.Topic, p int) []service.Message {
	n.t.Helper()
	msgs, err := n.e.Consume(n.ctx(), t, service.ConsumeRequest{Partition: p, Offset: 0, Max: 1000})
	if err != nil {
		n.t.Fatalf("replay %s/%d: %v", t.Name, p, err)
	}
	return msgs
}

// replayAll reads every visible record of every partition of t.
func (n *testNode) replayAll(t meta.Topic) []service.Message {
	n.t.Helper()
	var out []service.Message
	for p := 0; p < t.Partitions; p++ {
		out = append(out, n.replay(t, p)...)
	}
	return out
}

// waitVisible waits until every payload in want is visible in t (in any partition) and
// returns how often each payload occurs.
func (n *testNode) waitVisible(t meta.Topic, want ...string) map[string]int {
	n.t.Helper()
	var seen map[string]int
	eventually(n.t, 15*time.Second, func() bool {
		seen = map[string]int{}
		for _, m := range n.replayAll(t) {
			seen[string(m.Payload)]++
		}
		for _, w := range want {
			if seen[w] == 0 {
				return false
			}
		}
		return true
	}, "payloads %v visible in %s", want, t.Name)
	return seen
}

func (n *testNode) commit(t meta.Topic, p int, payloads ...string) (int64, error) {
	recs := make([]wal.Record, len(payloads))
	for i, pl := range payloads {
		recs[i] = wal.Record{Topic: t.Name, Incarnation: t.Incarnation, Partition: uint32(p), Payload: []byte(pl)}
	}
	return n.e.CommitLocal(n.ctx(), t.Name, t.Incarnation, p, recs)
}

func (n *testNode) mustCommit(t meta.Topic, p int, payloads ...string) int64 {
	n.t.Helper()
	first, err := n.commit(t, p, payloads...)
	if err != nil {
		n.t.Fatalf("commit %s/%d: %v", t.Name, p, err)
	}
	return first
}

func (n *testNode) topicDir(name string) string { return filepath.Join(n.dir, "topics", name) }

func (n *testNode) partDir(name string, p int) string {
	return filepath.Join(n.topicDir(name), fmt.Sprintf("p%05d", p))
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", d, fmt.Sprintf(format, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGoroutine waits until some goroutine is parked with wait reason state (e.g.
// "sync.Mutex.Lock", "select") and its innermost narad frame is fn. It proves a goroutine is
// blocked at a known point without guessing with sleeps.
func waitGoroutine(t *testing.T, state, fn string) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			header, rest, _ := strings.Cut(g, "\n")
			if !strings.Contains(header, "["+state) {
				continue
			}
			for _, line := range strings.Split(rest, "\n") {
				if strings.HasPrefix(line, "narad.dev/broker/") {
					if strings.Contains(line, fn+"(") {
						return true
					}
					break
				}
			}
		}
		return false
	}, "a goroutine parked in %s at %s", state, fn)
}

// resetFaults disarms every fault point now and after the test.
func resetFaults(t *testing.T) {
	faults.Reset()
	t.Cleanup(faults.Reset)
}

// seriesWithLabel lists "family{...}" for every gathered series carrying label=value.
func seriesWithLabel(t *testing.T, m *metrics.Metrics, label, value string) []string {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					out = append(out, f.GetName()+labelString(s))
				}
			}
		}
	}
	return out
}

func labelString(s *dto.Metric) string {
	var parts []string
	for _, lp := range s.GetLabel() {
		parts = append(parts, lp.GetName()+"="+lp.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// counterValue reads one counter series of a family (0 when absent).
func counterValue(t *testing.T, m *metrics.Metrics, family string, labels map[string]string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	next:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range s.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func isGone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// queueReq is a queue consume (no partition, no offset).
func queueReq(wait time.Duration, max int) service.ConsumeRequest {
	return service.ConsumeRequest{Partition: -1, Offset: -1, Wait: wait, Max: max}
}

// testLinkKey is the remote-link key of a test node's cluster secret.
func testLinkKey(t testing.TB) *credseal.Key {
	t.Helper()
	k, err := credseal.DeriveKey([]byte("test-cluster-secret"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
