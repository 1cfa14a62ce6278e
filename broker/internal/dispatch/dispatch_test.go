package dispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/wal"
)

func TestRecordsLandOnTheirPartitionAndCheckpointAdvances(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 4)
	var want []int
	for p := range 4 {
		want = append(want, h.appendRecs(t, "t", "A", p, 25)...)
	}
	h.appendRecs(t, "t", "", 6, 5) // format-1 record (no incarnation), partition ≥ n → 6 mod 4
	h.start(t)
	testwait.For(t, 20*time.Second, "checkpoint at next seq", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	got := landedIDs(h.com.snapshot())
	for _, id := range want {
		if l, ok := got[id]; !ok || l.partition != id/25 {
			t.Fatalf("record %d landed %+v, want partition %d", id, l, id/25)
		}
	}
	for id := 100; id < 105; id++ {
		if got[id].partition != 2 {
			t.Fatalf("record %d for partition 6 of 4 landed on %d, want 2", id, got[id].partition)
		}
	}
	if u := h.d.Undispatched(); u != 0 {
		t.Fatalf("Undispatched = %d after everything landed", u)
	}
}

// Within a bucket the WAL order is kept across passes, retries and concurrent producers.
func TestCommitsKeepWALOrderWithinAPartition(t *testing.T) {
	h := newHarness(t, Options{Now: time.Now, FailureBackoff: time.Millisecond, RerouteGrace: time.Hour, IdlePoll: time.Millisecond})
	h.topo.set("t", "A", 4)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(3, 4))
	h.com.setFail(func(string, int) error {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(4) == 0 {
			return errRefused
		}
		return nil
	})
	h.start(t)
	for i := range 60 {
		h.appendRecs(t, "t", "A", i%4, 1+i%5)
		h.appendRecs(t, "t", "A", (i*7)%4, 3)
	}
	testwait.For(t, 20*time.Second, "all dispatched", func() bool { return h.d.Undispatched() == 0 })
	last := map[int]int{}
	for _, l := range h.com.snapshot() {
		if prev, ok := last[l.partition]; ok && l.id <= prev {
			t.Fatalf("partition %d: record %d committed after %d", l.partition, l.id, prev)
		}
		last[l.partition] = l.id
	}
}

// PC-5: a failed commit keeps the checkpoint below the record; the next pass retries it.
func TestCheckpointDoesNotPassAFailedCommit(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 2)
	h.com.setFail(func(_ string, p int) error {
		if p == 0 {
			return errRefused // the owner's verify failed
		}
		return nil
	})
	stuck := h.appendRecs(t, "t", "A", 0, 1)[0]
	h.appendRecs(t, "t", "A", 1, 4)
	h.start(t)
	testwait.For(t, 20*time.Second, "partition 1 committed", func() bool { return len(h.com.snapshot()) == 4 })
	h.waitPasses(t, 2)
	if cp := h.w.Checkpoint(); cp != 0 {
		t.Fatalf("checkpoint %d passed the failed record at seq 0", cp)
	}
	if u := h.d.Undispatched(); u != 1 {
		t.Fatalf("Undispatched = %d, want 1 (committedAhead excluded)", u)
	}
	if n := h.com.attemptsFor("t", 0); n != 1 {
		t.Fatalf("%d attempts before the backoff elapsed, want 1", n)
	}
	h.clock.Advance(time.Second)
	testwait.For(t, 20*time.Second, "retry after backoff", func() bool { return h.com.attemptsFor("t", 0) == 2 })
	// The attempt is counted when it starts; its failure sets the next retry time when a pass
	// settles it. Wait for that before moving the clock, or the failure could be settled at the
	// later time and push the retry past the one second the clock moves.
	h.waitPasses(t, 2)
	h.com.setFail(nil)
	h.clock.Advance(time.Second)
	testwait.For(t, 20*time.Second, "checkpoint at next seq", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	if l := landedIDs(h.com.snapshot())[stuck]; l.partition != 0 {
		t.Fatalf("retried record landed on %d, want 0", l.partition)
	}
}

func TestDispatcherResumesFromCheckpointAfterRestart(t *testing.T) {
	dir := t.TempDir()
	w, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	topo := newFakeTopo()
	topo.set("t", "A", 1)
	clock := &fakeClock{}
	com := newFakeCommitter(t, clock)
	for i := range 10 {
		w.Append(context.Background(), wal.Record{Topic: "t", Incarnation: "A", Payload: []byte{byte('0' + i)}})
	}
	d := New(w, topo, com, Options{Now: clock.Now, IdlePoll: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	testwait.For(t, 20*time.Second, "first run drained", func() bool { return w.Checkpoint() == 10 })
	if err := d.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	cancel()
	<-done
	w.Close()

	w2, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	w2.Append(context.Background(), wal.Record{Topic: "t", Incarnation: "A", Payload: []byte("9")})
	d2 := New(w2, topo, com, Options{Now: clock.Now, IdlePoll: time.Millisecond})
	if u := d2.Undispatched(); u != 1 {
		t.Fatalf("Undispatched after restart = %d, want 1", u)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- d2.Run(ctx2) }()
	testwait.For(t, 20*time.Second, "second run drained", func() bool { return w2.Checkpoint() == 11 })
	cancel2()
	<-done
	if n := len(com.snapshot()); n != 11 {
		t.Fatalf("%d records committed in total, want 11 (no re-commit below the checkpoint)", n)
	}
}

// The checkpoint never passes an unfinished seq, under random failures, dead owners and reroutes.
func TestCheckpointNeverPassesAnUnfinishedSeq(t *testing.T) {
	for seed := range uint64(3) {
		t.Run("", func(t *testing.T) {
			h := newHarness(t, Options{Now: time.Now, FailureBackoff: time.Millisecond,
				RerouteGrace: 4 * time.Millisecond, IdlePoll: time.Millisecond, CommitFanout: 3})
			h.topo.set("t", "A", 5)
			h.topo.set("u", "B", 2)
			rng := rand.New(rand.NewPCG(seed, 99))
			var mu sync.Mutex
			failRng := rand.New(rand.NewPCG(seed, 7))
			h.com.setFail(func(string, int) error {
				mu.Lock()
				defer mu.Unlock()
				if failRng.IntN(3) == 0 {
					return errRefused
				}
				return nil
			})
			var seqOf []uint64 // record id → seq
			h.obs.check = func(p PassStats) {
				done := map[int]bool{}
				for _, l := range h.com.snapshot() {
					done[l.id] = true
				}
				for id, seq := range seqOf[:len(seqOf):len(seqOf)] {
					if seq < p.Checkpoint && !done[id] {
						t.Errorf("checkpoint %d passed unfinished record %d (seq %d)", p.Checkpoint, id, seq)
					}
				}
			}
			total := 0
			for i := range 80 {
				topic, n := "t", 5
				if i%3 == 0 {
					topic, n = "u", 2
				}
				cnt := 1 + rng.IntN(6)
				first := h.w.NextSeq()
				h.obs.mu.Lock()
				for j := range cnt {
					seqOf = append(seqOf, first+uint64(j))
				}
				h.obs.mu.Unlock()
				h.appendRecs(t, topic, map[string]string{"t": "A", "u": "B"}[topic], rng.IntN(n), cnt)
				total += cnt
				if i == 10 {
					h.start(t)
				}
				if i%20 == 0 {
					h.topo.setDead("t", rng.IntN(5), i%40 == 0)
				}
			}
			testwait.For(t, 20*time.Second, "all dispatched", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
			got := landedIDs(h.com.snapshot())
			if len(got) != total {
				t.Fatalf("%d distinct records landed, want %d", len(got), total)
			}
		})
	}
}

func TestWindowFollowsDistinctPartitionsClamped(t *testing.T) {
	h := newHarness(t, Options{})
	h.topo.set("t", "A", 2000)
	var windows []int // window of each non-idle pass
	h.obs.check = func(p PassStats) {
		if p.Scanned > 0 {
			windows = append(windows, p.Window)
		}
	}
	step := func(partitions int) { // one record per partition, one batch
		recs := make([]wal.Record, partitions)
		for p := range recs {
			recs[p] = wal.Record{Topic: "t", Incarnation: "A", Partition: uint32(p), Payload: []byte(strconv.Itoa(h.next))}
			h.next++
		}
		if _, err := h.w.Append(context.Background(), recs...); err != nil {
			t.Fatal(err)
		}
	}
	step(200) // → 64 × 200 = 12,800
	h.start(t)
	testwait.For(t, 20*time.Second, "drained", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	h.stop()
	step(1) // scanned with 12,800; → clamped up to 4,096
	h.start(t)
	testwait.For(t, 20*time.Second, "drained", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	h.stop()
	step(1500) // scanned with 4,096; 1,500 partitions → 96,000 clamped to 65,536
	h.start(t)
	testwait.For(t, 20*time.Second, "drained", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	h.stop()
	step(1)
	h.start(t)
	testwait.For(t, 20*time.Second, "drained", func() bool { return h.w.Checkpoint() == h.w.NextSeq() })
	h.obs.mu.Lock()
	defer h.obs.mu.Unlock()
	want := []int{MinWindow, 200 * WindowPerPartition, MinWindow, MaxWindow}
	if len(windows) != len(want) {
		t.Fatalf("windows %v, want %v", windows, want)
	}
	for i := range want {
		if windows[i] != want[i] {
			t.Fatalf("windows %v, want %v", windows, want)
		}
	}
}
