package move

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

type countingSweeper struct{ n atomic.Int64 }

func (s *countingSweeper) Sweep(context.Context) error { s.n.Add(1); return nil }

// settle removes the move of orders/0 so the runner has nothing to start.
func (h *harness) settle() {
	h.st.putAssignment(meta.Assignment{Topic: topicName, Partition: 0, Owner: srcNode})
}

func TestRunnerSkipsTheReadWhileDomainVersionsAreUnchanged(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.settle()
	r := NewRunner(h.cfg)
	ctx := context.Background()
	r.tick(ctx) // the first tick always reads
	r.tick(ctx)
	r.tick(ctx)
	if r.pace.Passes() != 1 || r.pace.Skips() != 2 {
		t.Fatalf("passes=%d skips=%d; want 1 read and 2 skips", r.pace.Passes(), r.pace.Skips())
	}
	h.st.bump() // any domain change
	r.tick(ctx)
	if r.pace.Passes() != 2 {
		t.Fatal("a domain version change must trigger a read")
	}
	h.clock.Advance(DefaultFullPassEvery)
	r.tick(ctx)
	if r.pace.Passes() != 3 {
		t.Fatal("a full pass is due every 30 s even without changes")
	}
	r.exited.Store(true) // a worker exited
	r.tick(ctx)
	if r.pace.Passes() != 4 {
		t.Fatal("a worker exit must force the next pass")
	}
	r.tick(ctx)
	if r.pace.Passes() != 4 {
		t.Fatal("the forced pass must not repeat")
	}
}

func TestRunnerSweepsOnTheFirstTickAndEveryNthTickCountingSkippedOnes(t *testing.T) {
	h := newHarness(t, 4096)
	h.settle()
	sw := &countingSweeper{}
	h.cfg.Sweeper = sw
	h.cfg.SweepEveryTicks = 3
	r := NewRunner(h.cfg)
	ctx := context.Background()
	step := func(want int64) {
		t.Helper()
		r.tick(ctx)
		testwait.For(t, 5*time.Second, "the sweep", func() bool { return sw.n.Load() == want && !r.sweeping.Load() })
	}
	step(1) // first tick after start
	step(1)
	step(1)
	step(2) // the 3rd tick later, although ticks 2–4 skipped the read
	if r.pace.Skips() == 0 {
		t.Fatal("setup: no tick skipped")
	}
	h.st.caughtUp.Store(false)
	step(2)
	step(2)
	step(2) // due, but the replica is not caught up: deferred
	h.st.caughtUp.Store(true)
	step(3) // runs on the next caught-up tick
}

func TestRunnerStartsWorkersOnlyWhileCaughtUp(t *testing.T) {
	h := newHarness(t, 4096)
	h.st.caughtUp.Store(false)
	r := NewRunner(h.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); r.stopAll() }()
	r.tick(ctx)
	r.tick(ctx) // no version change, but the unfinished pass forces a read
	if r.Workers() != 0 || r.pace.Passes() != 2 {
		t.Fatalf("workers=%d passes=%d; a lagging replica starts no worker and re-reads", r.Workers(), r.pace.Passes())
	}
	h.st.caughtUp.Store(true)
	r.tick(ctx)
	if r.Workers() != 1 {
		t.Fatal("the caught-up tick must start the worker")
	}
}

func TestRunFailsWithoutItsDependencies(t *testing.T) {
	if err := NewRunner(RunnerConfig{}).Run(context.Background()); !errors.Is(err, ErrMisconfigured) {
		t.Fatalf("Run = %v", err)
	}
}

func TestRunnerConfigDefaultsAreTheSpecConstants(t *testing.T) {
	c := RunnerConfig{}.withDefaults()
	if c.Tick != time.Second || c.FullPassEvery != 30*time.Second || c.SweepEveryTicks != 30 ||
		c.RetryBackoff != 2*time.Second || c.PassPacing != 50*time.Millisecond || c.ChunkBytes != 1<<20 ||
		c.LagBytes != 4<<20 || c.MaxPasses != 20 || c.NoProgressPasses != 3 || c.FreezeTTL != 30*time.Second ||
		c.RearmEvery != 7500*time.Millisecond || c.ReproposeLimit != 2*time.Minute ||
		c.RenameBackDelay != 15*time.Second || c.ForcePromoteAfter != 2*time.Minute || c.FutureMtimeSkew != time.Hour {
		t.Fatalf("defaults %+v", c)
	}
}

func TestNewWorkerClearsLeftoverStagingButNeverAQuarantine(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(10, 100)
	for _, d := range []string{h.staging(), h.staging() + ".quarantine"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "00000000000000000500.log"), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	h.waitFlipped(10 * time.Second)
	if exists(filepath.Join(h.path(), "00000000000000000500.log")) {
		t.Fatal("the leftover staging dir's content reached the install")
	}
	if !exists(filepath.Join(h.staging()+".quarantine", "00000000000000000500.log")) {
		t.Fatal("a quarantined staging copy was touched")
	}
	h.checkInstalled()
}

// A refused topic-dir preparation fails the attempt and warns once per move; the move
// retries until it succeeds.
func TestRefusedPreparationWarnsOnceAndRetries(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(10, 100)
	h.loc.prepareErr = transfer.ErrIncarnationChanged
	h.start()
	testwait.For(t, 5*time.Second, "several refused preparations", func() bool { return h.loc.prepares.Load() >= 5 })
	h.loc.mu.Lock()
	h.loc.prepareErr = nil
	h.loc.mu.Unlock()
	h.waitFlipped(10 * time.Second)
	if n := h.logs.count("move: topic directory preparation refused; retrying"); n != 1 {
		t.Fatalf("want one warning per move, got %d", n)
	}
	h.checkInstalled()
}

// docs/internals/moves.md §5.11 rule 3: a worker that ends while this node owns the partition keeps
// (sets aside) a staging copy the partition path may lack.
func TestEndingWhileOwningKeepsACopyThePathMayLack(t *testing.T) {
	h := newHarness(t, 2048)
	h.src.MustProduce(100, 100)
	h.src.downArm.Store(true) // the copy is staged; the move cannot freeze
	h.start()
	testwait.For(t, 5*time.Second, "a staged copy", func() bool {
		rep, ok := h.report()
		return ok && rep.CopyNextOffset == 100
	})
	// The partition ends up owned here by other means (no install from the source at the path).
	h.st.putAssignment(meta.Assignment{Topic: topicName, Partition: 0, Owner: selfNode})
	testwait.For(t, 5*time.Second, "the worker to end", func() bool { return h.r.Workers() == 0 })
	if !exists(h.staging() + ".quarantine") {
		t.Fatal("the staging copy must be set aside when the path may lack its records")
	}
}

// A topic deleted and recreated under a running move (same name, new incarnation) stops the
// worker; the next one moves the new incarnation.
func TestRecreatedTopicRestartsTheWorkerForTheNewIncarnation(t *testing.T) {
	h := newHarness(t, 2048)
	h.src.MustProduce(10, 100)
	h.src.downArm.Store(true) // keep the first worker busy
	h.start()
	testwait.For(t, 5*time.Second, "the first worker", func() bool { return h.logs.count("move: started") == 1 })
	h.st.putTopic(meta.Topic{Name: topicName, Partitions: 1, Incarnation: "inc-9", Role: meta.RoleParent})
	testwait.For(t, 5*time.Second, "a worker for the new incarnation", func() bool {
		for _, r := range h.logs.find("move: started") {
			if r.attrs["incarnation"] == "inc-9" {
				return true
			}
		}
		return false
	})
	if n := h.logs.count("move: started"); n != 2 || h.r.Workers() != 1 {
		t.Fatalf("started=%d running=%d; want the old worker stopped and one new", n, h.r.Workers())
	}
}
