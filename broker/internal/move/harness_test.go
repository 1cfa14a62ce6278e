package move

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

const (
	srcNode   = "n0"
	selfNode  = "n1"
	otherNode = "n2"
	topicName = "orders"
	childName = "orders-audit"
	srcAddr   = "127.0.0.1:7001"
)

// harness is one destination node (runner, fake engine, fake metastore) moving orders/0
// from a fake source backed by a real log.
type harness struct {
	t     *testing.T
	src   *fakeSource
	st    *fakeStore
	loc   *fakeLocal
	logs  *logRecorder
	m     *metrics.Metrics
	clock *fakeClock
	cfg   RunnerConfig
	r     *Runner

	cancel context.CancelFunc
	done   chan error
}

// newHarness builds the harness; segBytes sizes the source's segments (small → many).
func newHarness(t *testing.T, segBytes int64) *harness {
	t.Helper()
	faults.Reset()
	t.Cleanup(faults.Reset)
	h := &harness{t: t, src: newFakeSource(t, segBytes), st: newFakeStore(selfNode), loc: newFakeLocal(t),
		logs: newLogRecorder(), m: metrics.New(), clock: newFakeClock()}
	h.st.putTopic(meta.Topic{Name: topicName, Partitions: 1, Incarnation: "inc-1", Role: meta.RoleParent, Children: []string{childName}})
	h.st.putTopic(meta.Topic{Name: childName, Partitions: 1, Incarnation: "inc-2", Role: meta.RoleChild, Parent: topicName, AttachEpoch: "epoch-7"})
	h.st.putAssignment(meta.Assignment{Topic: topicName, Partition: 0, Owner: srcNode, Target: selfNode})
	h.st.putAssignment(meta.Assignment{Topic: childName, Partition: 0, Owner: selfNode})
	h.st.putMember(meta.Member{ID: srcNode, ClusterAddr: srcAddr, Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()})
	h.st.putMember(meta.Member{ID: selfNode, ClusterAddr: "127.0.0.1:7002", Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()})
	h.st.onFlip = h.src.lostOwnership
	h.cfg = RunnerConfig{
		NodeID: selfNode, Store: h.st, Source: h.src, Local: h.loc, Metrics: h.m,
		Logger: slog.New(h.logs), Now: time.Now,
		Tick: 5 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, PassPacing: time.Millisecond,
		FreezeTTL: 5 * time.Second, CallTimeout: 5 * time.Second,
	}
	return h
}

// useClock makes the runner decide on the harness's manual clock.
func (h *harness) useClock() { h.cfg.Now = h.clock.Now }

func (h *harness) start() {
	h.t.Helper()
	h.r = NewRunner(h.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.r.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

// stop cancels the runner and waits for every worker to exit.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		h.t.Errorf("runner did not stop\n%s", h.logs.dump())
	}
	h.cancel = nil
}

func (h *harness) owner() string {
	a, _ := h.st.Assignment(topicName, 0)
	return a.Owner
}

func (h *harness) waitFlipped(d time.Duration) {
	h.t.Helper()
	testwait.For(h.t, d, "the flip to this node", func() bool { return h.owner() == selfNode })
}

func (h *harness) path() string    { return h.loc.PartitionDir(topicName, 0) }
func (h *harness) staging() string { return h.loc.StagingDir(topicName, 0) }

func (h *harness) report() (transfer.Report, bool) { return h.r.Report(topicName, 0) }

func (h *harness) waitPhase(phase string, d time.Duration) {
	h.t.Helper()
	testwait.For(h.t, d, "phase "+phase, func() bool {
		rep, ok := h.report()
		return ok && rep.Phase == phase
	})
}

func (h *harness) counter(outcome string) float64 {
	return testutil.ToFloat64(h.m.MovesTotal.WithLabelValues(outcome))
}

func (h *harness) blocked(reason string) float64 {
	return testutil.ToFloat64(h.m.MovesBlocked.WithLabelValues(reason))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkInstalled proves the installed copy holds exactly the source's committed records:
// it recovers to the source's HWM and every record matches.
func (h *harness) checkInstalled() transfer.Marker {
	h.t.Helper()
	m, found, err := transfer.ReadMarker(h.path())
	if err != nil || !found {
		h.t.Fatalf("installed copy has no readable move.marker: found=%v err=%v", found, err)
	}
	l, err := plog.Open(h.path(), plog.Options{})
	if err != nil {
		h.t.Fatalf("open installed copy: %v", err)
	}
	defer l.Close()
	h.src.mu.Lock()
	defer h.src.mu.Unlock()
	want := h.src.log.HighWatermark()
	if l.NextOffset() != want || l.HighWatermark() != want || m.HWM != want {
		h.t.Fatalf("installed copy next=%d hwm=%d marker hwm=%d; source hwm %d", l.NextOffset(), l.HighWatermark(), m.HWM, want)
	}
	for off := h.src.log.OldestOffset(); off < want; off++ {
		a, err := h.src.log.Read(off)
		if err != nil {
			h.t.Fatalf("source read %d: %v", off, err)
		}
		b, err := l.Read(off)
		if err != nil {
			h.t.Fatalf("installed copy read %d: %v", off, err)
		}
		if !bytes.Equal(a.Payload, b.Payload) || a.CommittedAt != b.CommittedAt {
			h.t.Fatalf("record %d differs: %q vs %q", off, a.Payload, b.Payload)
		}
	}
	return m
}

// readCheckpoint decodes a partition dir's consumer.offset.
func readCheckpoint(t *testing.T, dir string) consume.Checkpoint {
	t.Helper()
	b, err := os.ReadFile(dir + "/" + consume.CheckpointFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := consume.DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// producer keeps producing small batches until stopped, retrying while frozen.
type producer struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func startProducer(s *fakeSource, batch, size int, every time.Duration) *producer {
	p := &producer{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			if err := s.Produce(batch, size); err == errGone {
				return
			}
			if every > 0 {
				time.Sleep(every)
			}
		}
	}()
	return p
}

func (p *producer) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}
