package consume

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/testwait"
)

// committerFixture drives a committer by hand on a fake clock.
type committerFixture struct {
	*fixture
	c *Committer
}

func newCommitterFixture(t *testing.T, hwm int64) *committerFixture {
	t.Helper()
	t.Cleanup(faults.Reset)
	fx := newFixture(t, hwm)
	c := NewCommitter(CommitterOptions{Now: fx.clock.Now})
	c.Add(fx.s)
	return &committerFixture{fixture: fx, c: c}
}

func (cf *committerFixture) journalImage() []byte {
	b, err := os.ReadFile(filepath.Join(cf.dir, JournalFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		cf.t.Fatal(err)
	}
	return b
}

func (cf *committerFixture) checkpoint() (Checkpoint, bool) {
	b, err := os.ReadFile(filepath.Join(cf.dir, CheckpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{}, false
	}
	if err != nil {
		cf.t.Fatal(err)
	}
	c, err := DecodeCheckpoint(b)
	if err != nil {
		cf.t.Fatal(err)
	}
	return c, true
}

// ackOffsets reserves everything below the hwm and acks the given offsets.
func (cf *committerFixture) ackOffsets(ds []Delivery, offs ...int64) {
	cf.t.Helper()
	for _, o := range offs {
		if err := cf.ack(ds[o], lim); err != nil {
			cf.t.Fatalf("ack %d: %v", o, err)
		}
	}
}

func TestCommitterJournalsOnlyWhenFrontierMovesForward(t *testing.T) {
	cf := newCommitterFixture(t, 10)
	ds, _ := cf.reserve(lim, 10)
	cf.c.tick()
	if len(cf.journalImage()) != 0 {
		t.Fatal("journal written with no progress")
	}
	cf.ackOffsets(ds, 0, 2) // frontier 0, 2 parked ahead
	cf.c.tick()
	cf.c.tick()
	img := cf.journalImage()
	if len(img) != 16 {
		t.Fatalf("journal %d bytes after one move, want one record", len(img))
	}
	cf.ackOffsets(ds, 1) // collapses to 2
	cf.c.tick()
	img = cf.journalImage()
	if len(img) != 32 {
		t.Fatalf("journal %d bytes, want two records", len(img))
	}
	r, _ := DecodeJournal(img)
	if r.Frontier != 2 || r.Seq != 2 {
		t.Fatalf("last record %+v, want frontier 2 seq 2", r)
	}
	first, _ := DecodeJournal(img[:16])
	if first.Frontier != 0 {
		t.Fatalf("first record %+v", first)
	}
}

func TestCommitterSyncsJournalEverySyncInterval(t *testing.T) {
	cf := newCommitterFixture(t, 10)
	ds, _ := cf.reserve(lim, 10)
	cf.c.tick() // first tick: sync due, nothing to sync
	cf.ackOffsets(ds, 0)
	cf.clock.Advance(100 * time.Millisecond)
	cf.c.tick()
	if d := cf.s.State().Durable; d != -1 {
		t.Fatalf("durable %d before the sync interval passed", d)
	}
	cf.clock.Advance(DefaultSyncInterval)
	cf.c.tick()
	if d := cf.s.State().Durable; d != 0 {
		t.Fatalf("durable %d after sync, want 0", d)
	}
}

func TestCheckpointEveryIntervalThenJournalTruncated(t *testing.T) {
	cf := newCommitterFixture(t, 10)
	ds, _ := cf.reserve(lim, 10)
	cf.c.tick() // starts the checkpoint clock
	cf.ackOffsets(ds, 0, 1, 5, 7)
	cf.clock.Advance(DefaultCheckpointInterval - time.Millisecond)
	cf.c.tick()
	if _, ok := cf.checkpoint(); ok {
		t.Fatal("checkpoint written before its interval")
	}
	if !cf.s.Dirty() {
		t.Fatal("shard not dirty before its checkpoint")
	}
	cf.clock.Advance(time.Millisecond)
	cf.c.tick()
	got, ok := cf.checkpoint()
	want := Checkpoint{Frontier: 1, AckedAhead: []int64{5, 7}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoint %+v %v, want %+v", got, ok, want)
	}
	if n := len(cf.journalImage()); n != 0 {
		t.Fatalf("journal %d bytes after checkpoint, want truncated", n)
	}
	if cf.s.Dirty() || cf.s.State().Durable != 1 {
		t.Fatalf("after checkpoint: dirty %v state %+v", cf.s.Dirty(), cf.s.State())
	}
	// Nothing changed: no rewrite even when the interval passes again.
	st, _ := os.Stat(filepath.Join(cf.dir, CheckpointFile))
	cf.clock.Advance(DefaultCheckpointInterval)
	cf.c.tick()
	st2, _ := os.Stat(filepath.Join(cf.dir, CheckpointFile))
	if !os.SameFile(st, st2) {
		t.Fatal("clean shard re-checkpointed")
	}
}

func TestFailedCheckpointKeepsJournalAndRetries(t *testing.T) {
	cf := newCommitterFixture(t, 10)
	ds, _ := cf.reserve(lim, 10)
	cf.c.tick()
	cf.ackOffsets(ds, 0, 1, 2)
	faults.Set(FaultCheckpoint, nil)
	cf.clock.Advance(DefaultCheckpointInterval)
	cf.c.tick()
	if _, ok := cf.checkpoint(); ok {
		t.Fatal("checkpoint written despite the fault")
	}
	if r, ok := DecodeJournal(cf.journalImage()); !ok || r.Frontier != 2 {
		t.Fatalf("journal %+v %v: must keep the frontier when the checkpoint fails", r, ok)
	}
	faults.Reset()
	cf.clock.Advance(DefaultCommitTick)
	cf.c.tick()
	if c, ok := cf.checkpoint(); !ok || c.Frontier != 2 {
		t.Fatalf("retried checkpoint %+v %v", c, ok)
	}
	if len(cf.journalImage()) != 0 {
		t.Fatal("journal not truncated after the retried checkpoint")
	}
}

func TestJournalWriteErrorRequeuesFrontier(t *testing.T) {
	cf := newCommitterFixture(t, 10)
	ds, _ := cf.reserve(lim, 10)
	cf.ackOffsets(ds, 0)
	faults.SetNth(FaultJournalAppend, 1, nil)
	cf.c.tick()
	if len(cf.journalImage()) != 0 {
		t.Fatal("journal written despite the fault")
	}
	cf.ackOffsets(ds, 1)
	cf.c.tick()
	if r, ok := DecodeJournal(cf.journalImage()); !ok || r.Frontier != 1 {
		t.Fatalf("journal after retry = %+v %v, want frontier 1", r, ok)
	}
	faults.SetNth(FaultJournalSync, 1, nil)
	cf.clock.Advance(DefaultSyncInterval)
	cf.c.tick()
	if cf.s.State().Durable != -1 {
		t.Fatal("durable advanced although the sync failed")
	}
	cf.clock.Advance(DefaultSyncInterval)
	cf.c.tick()
	if d := cf.s.State().Durable; d != 1 {
		t.Fatalf("durable %d after the retried sync, want 1", d)
	}
}

func TestCloseWritesFinalCheckpoint(t *testing.T) {
	cf := newCommitterFixture(t, 10)
	ds, _ := cf.reserve(lim, 10)
	cf.c.tick()
	cf.ackOffsets(ds, 0, 3, 4)
	cf.c.Remove(cf.s)
	if err := cf.s.Close(); err != nil {
		t.Fatal(err)
	}
	want := Checkpoint{Frontier: 0, AckedAhead: []int64{3, 4}}
	if c, ok := cf.checkpoint(); !ok || !reflect.DeepEqual(c, want) {
		t.Fatalf("final checkpoint %+v %v, want %+v", c, ok, want)
	}
	s2 := cf.open()
	if got := s2.Frontier(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened %+v", got)
	}
}

func TestST15MissingPartitionDirNeverRecreated(t *testing.T) {
	for _, journalOpen := range []bool{false, true} {
		name := "journal never opened"
		if journalOpen {
			name = "journal open when the dir goes"
		}
		t.Run(name, func(t *testing.T) {
			cf := newCommitterFixture(t, 10)
			ds, _ := cf.reserve(lim, 10)
			if journalOpen {
				cf.ackOffsets(ds, 0)
				cf.c.tick()
			}
			cf.ackOffsets(ds, 1, 5)
			if err := os.RemoveAll(cf.dir); err != nil {
				t.Fatal(err)
			}
			cf.clock.Advance(DefaultCheckpointInterval)
			cf.c.tick()
			if err := cf.c.FlushAll(); err != nil {
				t.Fatalf("FlushAll with the dir gone = %v, want skipped silently", err)
			}
			if err := cf.s.Checkpoint(); !errors.Is(err, durable.ErrDirMissing) {
				t.Fatalf("Checkpoint = %v, want ErrDirMissing", err)
			}
			if err := cf.s.Close(); err != nil {
				t.Fatalf("Close = %v, want nil", err)
			}
			if _, err := os.Stat(cf.dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("partition dir resurrected: %v", err)
			}
		})
	}
}

// TestPC18FrontierPersistence acks 1,000 messages (many out of order) while the committer
// runs, then abandons the shard without Close, as a kill -9 would, and recovers from the
// files: the recovered frontier is at least what the last synced journal record said, and no
// acked offset at or below it (nor any recovered acked-ahead offset) is delivered again,
// while every unacked offset is.
func TestPC18FrontierPersistence(t *testing.T) {
	const total = 1200
	dir := t.TempDir()
	src := newSource(total)
	s, err := OpenShard(0, dir, src, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := NewCommitter(CommitterOptions{Tick: 2 * time.Millisecond, SyncInterval: 10 * time.Millisecond, CheckpointInterval: 40 * time.Millisecond})
	c.Add(s)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(ctx) }()

	l := Limits{VisibilityTimeout: time.Hour, MaxInFlight: total, MaxAckedAhead: total}
	ds, _ := s.Reserve(l, total, 0)
	if len(ds) != total {
		t.Fatalf("reserved %d", len(ds))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	toAck := map[int]bool{} // 0..989 plus 1100..1109: the last ten park in acked-ahead
	for o := 0; o < 990; o++ {
		toAck[o] = true
	}
	for o := 1100; o < 1110; o++ {
		toAck[o] = true
	}
	acked := map[int64]bool{}
	// Ack in order of chunks, shuffled within each, so the frontier moves while acks park ahead.
	for i := 0; i < total; i += 50 {
		chunk := make([]int, 0, 50)
		for j := i; j < i+50; j++ {
			if toAck[j] {
				chunk = append(chunk, j)
			}
		}
		rng.Shuffle(len(chunk), func(a, b int) { chunk[a], chunk[b] = chunk[b], chunk[a] })
		for _, o := range chunk {
			if err := s.Ack(int64(o), ds[o].Handle.Nonce, l); err != nil {
				t.Fatal(err)
			}
			acked[int64(o)] = true
		}
		if i == 600 {
			committed := s.State().Committed
			testwait.For(t, 5*time.Second, "journal sync", func() bool { return s.State().Durable >= committed })
		}
	}
	// "Crash": stop the committer and drop the shard without its final checkpoint.
	cancel()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	durableAtCrash := s.State().Durable
	inMemory := s.State().Committed
	if durableAtCrash < 0 {
		t.Fatal("nothing became durable while the committer ran")
	}

	s2, err := OpenShard(0, dir, src, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rec := s2.Frontier()
	t.Logf("durable at crash %d, in memory %d, recovered %d (+%d acked-ahead)", durableAtCrash, inMemory, rec.Frontier, len(rec.AckedAhead))
	if rec.Frontier < durableAtCrash || rec.Frontier > inMemory {
		t.Fatalf("recovered frontier %d outside [durable %d, in-memory %d]", rec.Frontier, durableAtCrash, inMemory)
	}
	for o := int64(0); o <= rec.Frontier; o++ {
		if !acked[o] {
			t.Fatalf("recovered frontier %d covers unacked offset %d", rec.Frontier, o)
		}
	}
	for _, o := range rec.AckedAhead {
		if !acked[o] {
			t.Fatalf("recovered acked-ahead %d was never acked", o)
		}
	}
	again, _ := s2.Reserve(l, total, 0)
	got := map[int64]bool{}
	for _, d := range again {
		o := d.Handle.Offset
		got[o] = true
		if o <= rec.Frontier {
			t.Fatalf("offset %d at or below the durable frontier %d redelivered", o, rec.Frontier)
		}
		if acked[o] && o <= durableAtCrash {
			t.Fatalf("acked offset %d redelivered", o)
		}
	}
	for o := int64(0); o < total; o++ {
		if !acked[o] && !got[o] {
			t.Fatalf("unacked offset %d lost after the crash", o)
		}
	}
}

func TestAppendsAfterStaleJournalTailSurviveRecovery(t *testing.T) {
	cf := newCommitterFixture(t, 0)
	cf.s.Close()
	writeFile(t, cf.dir, CheckpointFile, EncodeCheckpoint(Checkpoint{Frontier: 40}))
	writeFile(t, cf.dir, JournalFile, journal(JournalRecord{50, 5}, JournalRecord{60, 6}, JournalRecord{30, 3}))
	cf.src.set(func(f *fakeSource) { f.hwm = 100 })
	s := cf.open()
	if f := s.Frontier().Frontier; f != 60 {
		t.Fatalf("recovered %d, want 60 (stale tail ignored)", f)
	}
	c := NewCommitter(CommitterOptions{Now: cf.clock.Now})
	c.Add(s)
	ds, _ := s.Reserve(lim, 1, 0)
	if err := s.Ack(ds[0].Handle.Offset, ds[0].Handle.Nonce, lim); err != nil {
		t.Fatal(err)
	}
	c.tick()
	r, ok := DecodeJournal(cf.journalImage())
	if !ok || r.Frontier != 61 || r.Seq != 7 {
		t.Fatalf("journal after append = %+v %v, want frontier 61 seq 7", r, ok)
	}
}
