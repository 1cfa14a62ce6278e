package move

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

// cursorRecord is a cursor record as a transfer listing carries it (version 1, no child).
func cursorRecord(t *testing.T, epoch string, next int64) []byte {
	t.Helper()
	b, err := cursorfile.EncodeV1(epoch, next)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMoveInstallsAnExactVerifiedCopyAndFlips(t *testing.T) {
	h := newHarness(t, 4096)
	for range 20 {
		h.src.MustProduce(10, 100) // one frame each: several segments
	}
	h.src.setPositions(50, []int64{52, 55}, []transfer.Cursor{{Child: childName, Record: cursorRecord(t, "epoch-7", 120)}})
	h.start()
	h.waitFlipped(10 * time.Second)
	testwait.For(t, 5*time.Second, "the worker to exit", func() bool { return h.r.Workers() == 0 })

	st, err := plog.PeekDir(h.path())
	if err != nil || !st.Exact || st.HighWatermark != 200 {
		t.Fatalf("installed hwm file must be exact and CLEAN at 200: %+v %v", st, err)
	}
	m := h.checkInstalled()
	if m.From != srcNode || m.To != selfNode || m.Force || m.Incarnation != "inc-1" || m.DurableAtMs == 0 ||
		m.InstalledAtMs == 0 || len(m.Links) != 1 || m.Links[0] != (transfer.Link{Child: childName, Epoch: "epoch-7"}) {
		t.Fatalf("marker %+v", m)
	}
	c := readCheckpoint(t, h.path())
	if c.Frontier != 50 || !slices.Equal(c.AckedAhead, []int64{52, 55}) {
		t.Fatalf("installed checkpoint %+v, want frontier 50 acked [52 55]", c)
	}
	b, err := os.ReadFile(cursorfile.Path(h.path(), childName))
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := cursorfile.Parse(b); err != nil || cs.NextOffset != 120 || cs.Epoch != "epoch-7" {
		t.Fatalf("installed cursor %+v %v", cs, err)
	}
	if exists(h.staging()) {
		t.Fatal("the staging dir survived a completed move")
	}
	if got := h.counter(outcomeCompleted); got != 1 {
		t.Fatalf("narad_moves_total{completed} = %v", got)
	}
	if got := testutil.ToFloat64(h.m.MovesBytes); got < float64(h.src.fetchedBytes.Load()) || got == 0 {
		t.Fatalf("narad_moves_bytes_total = %v, fetched %d", got, h.src.fetchedBytes.Load())
	}
	if got := testutil.ToFloat64(h.m.MovesInflight); got != 0 {
		t.Fatalf("narad_moves_inflight = %v after the move", got)
	}
	if h.src.fences.Load() != 1 || h.src.fenceRefusals.Load() != 0 || h.src.arms.Load() != 1 {
		t.Fatalf("want one arm and one accepted fence: arms=%d fences=%d refused=%d", h.src.arms.Load(), h.src.fences.Load(), h.src.fenceRefusals.Load())
	}
	if h.loc.installs.Load() != 1 || h.loc.drops.Load() < 2 {
		t.Fatalf("installs=%d drops=%d", h.loc.installs.Load(), h.loc.drops.Load())
	}
}

func TestMoveOfAnEmptyPartitionCompletes(t *testing.T) {
	h := newHarness(t, 4096)
	h.start()
	h.waitFlipped(10 * time.Second)
	m := h.checkInstalled()
	if m.HWM != 0 {
		t.Fatalf("marker hwm %d", m.HWM)
	}
	if exists(filepath.Join(h.path(), "consumer.offset")) {
		t.Fatal("a source without a committed offset must install no consumer.offset")
	}
}

func TestReportDescribesTheRunningMove(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(20, 100)
	h.src.downArm.Store(true) // the copy completes, the freeze cannot be armed
	before := time.Now().Unix()
	h.start()
	testwait.For(t, 5*time.Second, "an arm attempt", func() bool {
		rep, ok := h.report()
		return ok && rep.LastError != "" && rep.Passes >= 2
	})
	rep, _ := h.report()
	if rep.ReportedBy != selfNode || rep.SourceHWM != 20 || rep.CopiedBytes == 0 || rep.CopyNextOffset != 20 ||
		rep.StartedAt < before || rep.Phase == "" {
		t.Fatalf("report %+v", rep)
	}
	if _, ok := h.r.Report(topicName, 9); ok {
		t.Fatal("a report for a partition with no worker")
	}
	if got := testutil.ToFloat64(h.m.MovesInflight); got != 1 {
		t.Fatalf("narad_moves_inflight = %v", got)
	}
}

// MV-16: a sealed source segment with a damaged frame that the source tolerates (it reads
// those offsets as corrupt) is copied byte for byte; the move completes and the new owner
// reads exactly what the source reads, skipping the same offsets.
func TestDamagedSealedSegmentIsCopiedVerbatimAndSkippedAlike(t *testing.T) {
	h := newHarness(t, 4096)
	for range 20 {
		h.src.MustProduce(10, 100)
	}
	segs, paths := h.src.segmentFiles()
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	f, err := os.OpenFile(paths[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, segs[0].Size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	readAll := func(l *plog.Log) map[int64]string {
		out := map[int64]string{}
		for o := l.OldestOffset(); o < l.HighWatermark(); o++ {
			r, err := l.Read(o)
			switch {
			case errors.Is(err, plog.ErrCorruptRecord):
				out[o] = "corrupt"
			case err != nil:
				t.Fatalf("read %d: %v", o, err)
			default:
				out[o] = string(r.Payload)
			}
		}
		return out
	}
	// The source finds the damage at its next open, as after the disk went bad under it.
	h.src.mu.Lock()
	h.src.log.Close()
	h.src.log, err = plog.Open(h.src.dir, plog.Options{SegmentBytes: 4096})
	if err != nil {
		h.src.mu.Unlock()
		t.Fatalf("reopen the damaged source: %v", err)
	}
	want := readAll(h.src.log)
	h.src.mu.Unlock()
	corrupt := 0
	for _, v := range want {
		if v == "corrupt" {
			corrupt++
		}
	}
	if corrupt == 0 {
		t.Fatal("the damage did not hit a record")
	}
	h.start()
	h.waitFlipped(10 * time.Second)
	if _, found, err := transfer.ReadMarker(h.path()); !found || err != nil {
		t.Fatalf("installed copy without a readable marker: %v %v", found, err)
	}
	l, err := plog.Open(h.path(), plog.Options{})
	if err != nil {
		t.Fatalf("open the installed copy: %v", err)
	}
	defer l.Close()
	if hwm := h.src.HWM(); l.NextOffset() != hwm || l.HighWatermark() != hwm {
		t.Fatalf("installed copy next=%d hwm=%d; source hwm %d", l.NextOffset(), l.HighWatermark(), hwm)
	}
	if got := readAll(l); !maps.Equal(got, want) {
		var diff []string
		for o := range want {
			if got[o] != want[o] {
				diff = append(diff, fmt.Sprintf("%d: source %.12q, copy %.12q", o, want[o], got[o]))
			}
		}
		slices.Sort(diff)
		t.Fatalf("the new owner reads differently from the source (%d corrupt offsets at the source): %v", corrupt, diff)
	}
}

// The copy goes over the segment stream: one stream per segment a pass copies.
func TestTheCopyStreamsSegments(t *testing.T) {
	h := newHarness(t, 64<<10)
	for range 10 {
		h.src.MustProduce(20, 100)
	}
	h.start()
	h.waitFlipped(20 * time.Second)
	h.checkInstalled()
	if h.src.streams.Load() == 0 {
		t.Fatal("no segment stream was opened")
	}
}

// A source that goes silent mid-stream for longer than CallTimeout is given up on, and the
// next attempt copies the rest.
func TestASilentStreamIsAbandonedAndTheCopyResumes(t *testing.T) {
	h := newHarness(t, 64<<10)
	h.cfg.CallTimeout = 300 * time.Millisecond
	h.cfg.ChunkBytes = 1 << 10
	var stalled atomic.Bool
	h.src.onFetch = func(s *fakeSource, base, at int64) {
		if s.fetches.Load() == 3 && stalled.CompareAndSwap(false, true) {
			time.Sleep(time.Second)
		}
	}
	for range 10 {
		h.src.MustProduce(20, 100)
	}
	h.start()
	h.waitFlipped(30 * time.Second)
	h.checkInstalled()
	if !stalled.Load() {
		t.Fatal("the stall was never hit")
	}
	if got := h.src.cancelledStreams.Load(); got != 1 {
		t.Fatalf("%d streams cancelled by the destination; want the silent one", got)
	}
}

// A source without the segment stream (an older release): the destination falls back to
// op-23 fetches, which overlap (FetchesInFlight), and a copy made with small chunks, many in
// flight, is still byte for byte the source's.
func TestWithoutTheStreamChunkFetchesOverlapAndTheCopyStaysExact(t *testing.T) {
	h := newHarness(t, 64<<10)
	h.cfg.ChunkBytes = 1 << 10
	h.cfg.FetchesInFlight = 4
	h.src.noStream.Store(true)
	h.src.fetchDelay.Store(int64(2 * time.Millisecond))
	for range 10 {
		h.src.MustProduce(20, 100)
	}
	h.start()
	h.waitFlipped(20 * time.Second)
	h.checkInstalled()
	if got := h.src.streams.Load(); got != 1 {
		t.Fatalf("%d streams tried; want 1, then fetches only", got)
	}
	if got := h.src.maxFetching.Load(); got < 2 {
		t.Fatalf("at most %d fetch in flight; want overlapping fetches", got)
	}
	if got := h.src.maxFetching.Load(); got > 4 {
		t.Fatalf("%d fetches in flight, above FetchesInFlight 4", got)
	}
}
