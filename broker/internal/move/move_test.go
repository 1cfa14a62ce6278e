package move

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/transfer"
)

func cursorRecord(t *testing.T, epoch string, next int64) []byte {
	t.Helper()
	b, err := cursorfile.Encode(epoch, next)
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
	waitFor(t, "the worker to exit", 5*time.Second, func() bool { return h.r.Workers() == 0 })

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
	waitFor(t, "an arm attempt", 5*time.Second, func() bool {
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
