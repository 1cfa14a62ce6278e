package dispatch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

func openTestWAL(t *testing.T, records int) *wal.WAL {
	t.Helper()
	w, err := wal.Open(t.TempDir(), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for range records {
		if _, err := w.Append(context.Background(), wal.Record{Topic: "t", Incarnation: "A", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// Requests coalesce into writes of the newest value, and the durable checkpoint never passes
// what was asked for.
func TestAdvancerWritesTheNewestRequestedCheckpoint(t *testing.T) {
	w := openTestWAL(t, 100)
	a := newAdvancer(w, slog.New(slog.DiscardHandler))
	go a.run()
	defer a.stop()
	for cp := uint64(1); cp <= 60; cp++ {
		a.request(cp)
		if got := w.Checkpoint(); got > cp {
			t.Fatalf("durable checkpoint %d passed the newest request %d", got, cp)
		}
	}
	a.request(40) // an older value never lowers what was asked
	testwait.For(t, 20*time.Second, "checkpoint 60", func() bool { return w.Checkpoint() == 60 })
}

// stop writes the last request at once, even inside the pacing interval, so a clean shutdown
// leaves the durable checkpoint where the last pass put it.
func TestAdvancerStopWritesTheLastRequest(t *testing.T) {
	w := openTestWAL(t, 10)
	a := newAdvancer(w, slog.New(slog.DiscardHandler))
	go a.run()
	a.request(3)
	testwait.For(t, 20*time.Second, "checkpoint 3", func() bool { return w.Checkpoint() == 3 })
	a.request(9) // inside advanceEvery of the first write: paced
	a.stop()
	if got := w.Checkpoint(); got != 9 {
		t.Fatalf("checkpoint after stop = %d, want 9", got)
	}
}

// A write the WAL refuses (here: a checkpoint past the next seq) is retried without a new
// request once it can succeed.
func TestAdvancerRetriesAFailedWrite(t *testing.T) {
	w := openTestWAL(t, 5)
	a := newAdvancer(w, slog.New(slog.DiscardHandler))
	go a.run()
	defer a.stop()
	a.request(8)
	time.Sleep(3 * advanceRetry / 2) // at least one refused write
	if got := w.Checkpoint(); got != 0 {
		t.Fatalf("checkpoint %d moved past the WAL's next seq 5", got)
	}
	for range 3 {
		if _, err := w.Append(context.Background(), wal.Record{Topic: "t", Incarnation: "A", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 20*time.Second, "checkpoint 8 after the retry", func() bool { return w.Checkpoint() == 8 })
}

// Run hands every pass's checkpoint to the advancer and writes the last one before returning.
func TestRunLeavesTheDurableCheckpointAtTheLastPass(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 1)
	h.appendRecs(t, "t", "A", 0, 50)
	h.start(t)
	testwait.For(t, 20*time.Second, "50 committed", func() bool { return len(h.com.snapshot()) == 50 })
	h.appendRecs(t, "t", "A", 0, 7)
	testwait.For(t, 20*time.Second, "57 committed", func() bool { return len(h.com.snapshot()) == 57 })
	h.waitPasses(t, 1) // the pass that committed them has handed its checkpoint over
	h.stop()
	if got := h.w.Checkpoint(); got != 57 {
		t.Fatalf("checkpoint after Run returned = %d, want 57", got)
	}
}

// After a pass that found less than a window while more records were accepted during it,
// the next one waits PartialPause: a stream of appends is committed in a few larger commits
// rather than one commit per append.
func TestPartialPassesPauseSoRecordsGatherIntoFewerCommits(t *testing.T) {
	commits := func(pause time.Duration) (int, time.Duration) {
		h := newHarness(t, Options{IdlePoll: time.Millisecond, PartialPause: pause})
		h.com.fail = func(string, int) error { time.Sleep(2 * time.Millisecond); return nil } // an owner's fsync
		h.topo.set("t", "A", 1)
		h.start(t)
		defer h.stop()
		start := time.Now()
		for range 60 {
			h.appendRecs(t, "t", "A", 0, 1)
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		testwait.For(t, 20*time.Second, "60 committed", func() bool { return len(h.com.snapshot()) == 60 })
		return h.com.attemptsFor("t", 0), took
	}
	const pause = 400 * time.Millisecond
	paced, took := commits(pause)
	unpaced, _ := commits(-1)
	// 60 appends about 1 ms apart, commits of 2 ms: with a 400 ms pause, the first append's
	// pass, then the rest after the pause; without one, a commit every two or three appends.
	// On a loaded machine the appends may outlast a pause (each pause they span allows one
	// more commit), and a gap in them longer than a pass commits what came before at once (a
	// pass that saw nothing new does not pause): so a few more commits are within the rule as
	// long as the pause still gathers the stream into a third of the commits or fewer.
	if want := 3 + int(took/pause); paced > want && 3*paced > unpaced {
		t.Fatalf("with a 400 ms pause the stream took %d commits over %v of appends (without one %d), want ≤ %d",
			paced, took, unpaced, want)
	}
	if unpaced < 10 {
		t.Fatalf("without a pause the stream took only %d commits; the comparison proves nothing", unpaced)
	}
}

// A pass during which nothing more was accepted pauses nothing: records that come one at a
// time (a producer that waits for each answer) are each committed as soon as they are
// accepted, not after the pause of the one before.
func TestALoneRecordIsCommittedWithoutWaitingForThePause(t *testing.T) {
	h := newHarness(t, Options{IdlePoll: time.Hour, PartialPause: time.Hour})
	h.topo.set("t", "A", 1)
	h.start(t)
	defer h.stop()
	for i := range 5 {
		h.appendRecs(t, "t", "A", 0, 1)
		testwait.For(t, 10*time.Second, "the lone record committed", func() bool { return len(h.com.snapshot()) == i+1 })
	}
	if got := h.com.attemptsFor("t", 0); got != 5 {
		t.Fatalf("5 lone records took %d commits, want one each", got)
	}
}
