package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/testwait"
)

func writeDir(t *testing.T, dir, marker string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "p00000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p00000", "00000000000000000000.log"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if marker != "" {
		if err := os.WriteFile(filepath.Join(dir, datadir.IncarnationFile), []byte(marker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// sweepOnce runs sweep until one run is not deferred (a sweep does nothing while the replica
// is not caught up, which a background apply makes it for a moment) and returns that run.
func sweepOnce(t *testing.T, sweep func() SweepResult) SweepResult {
	t.Helper()
	var res SweepResult
	testwait.For(t, 10*time.Second, "a sweep on a caught-up replica", func() bool {
		res = sweep()
		return !res.Deferred
	})
	return res
}

// TestSweepRemovesOnlyDataTheLeaderConfirmsGone: the orphan sweep deletes a marker-less dir of
// an unknown topic, a dir whose marker names a dead incarnation, and a .stale dir of a gone
// incarnation — and never the live topic's data, whether or not its dir has a marker.
func TestSweepRemovesOnlyDataTheLeaderConfirmsGone(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	live := n.createTopic(service.CreateTopicRequest{Name: "live"})
	n.produce(live, service.ProduceRecord{Partition: 0, Payload: []byte("keep me")})
	eventually(t, 10*time.Second, func() bool { return len(n.replay(live, 0)) == 1 }, "record committed")

	data := n.e.cfg.DataDir
	orphan := filepath.Join(data, "topics", "orphan")               // no marker, topic unknown
	deadInc := filepath.Join(data, "topics", "gone")                // marker of a dead incarnation
	stale := filepath.Join(data, ".stale", "live@0123456789abcdef") // an old incarnation of "live"
	staleLive := filepath.Join(data, ".stale", "x@"+live.Incarnation)
	writeDir(t, orphan, "")
	writeDir(t, deadInc, "fedcba9876543210")
	writeDir(t, stale, "0123456789abcdef")
	writeDir(t, staleLive, "")
	if err := os.Rename(staleLive, filepath.Join(data, ".stale", "live@"+live.Incarnation)); err != nil {
		t.Fatal(err)
	}
	keptStale := filepath.Join(data, ".stale", "live@"+live.Incarnation) // names the live incarnation

	res := sweepOnce(t, func() SweepResult { return n.e.SweepOrphans(n.ctx()) })
	if exists(orphan) || exists(deadInc) || exists(stale) {
		t.Fatalf("sweep left confirmed-gone data: orphan=%v dead=%v stale=%v", exists(orphan), exists(deadInc), exists(stale))
	}
	if !exists(filepath.Join(data, "topics", "live")) || len(n.replay(live, 0)) != 1 {
		t.Fatal("sweep touched the live topic's data")
	}
	if !exists(keptStale) {
		t.Fatal("sweep removed a .stale dir whose incarnation is still live")
	}
	if res.Removed != 3 || res.Quarantined != 1 {
		t.Fatalf("result %+v, want 3 removed and 1 quarantined", res)
	}
	if got := testutil.ToFloat64(n.m.QuarantinedCopies); got != 1 {
		t.Fatalf("narad_quarantined_copies = %v, want 1", got)
	}
}

// The running sweep only counts a marker-less dir of an unknown topic
// (narad_orphan_topic_dirs); removing it is the startup sweep's job. A dir whose marker names
// a deleted incarnation is still removed at runtime.
func TestRunningSweepOnlyCountsMarkerlessDirs(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	sweepOnce(t, func() SweepResult { return n.e.SweepOrphans(n.ctx()) }) // the startup sweep, on an empty data dir
	data := n.e.cfg.DataDir
	orphan := filepath.Join(data, "topics", "orphan")
	deadInc := filepath.Join(data, "topics", "gone")
	writeDir(t, orphan, "")
	writeDir(t, deadInc, "fedcba9876543210")

	res := sweepOnce(t, func() SweepResult { return n.e.runningSweep(n.ctx()) })
	if !exists(orphan) {
		t.Fatal("the running sweep removed a marker-less topic dir")
	}
	if exists(deadInc) {
		t.Fatal("the running sweep kept a dir whose marker names a deleted incarnation")
	}
	if res.Markerless != 1 || testutil.ToFloat64(n.m.OrphanTopicDirs) != 1 {
		t.Fatalf("result %+v, narad_orphan_topic_dirs %v; want the marker-less dir counted", res, testutil.ToFloat64(n.m.OrphanTopicDirs))
	}
	// The next start's sweep removes it.
	if res := sweepOnce(t, func() SweepResult { return n.e.SweepOrphans(n.ctx()) }); exists(orphan) || res.Removed != 1 {
		t.Fatalf("the startup sweep kept the marker-less dir (%+v)", res)
	}
}

// A node whose startup sweep was skipped (replica not caught up in time) has its first
// caught-up running sweep remove marker-less dirs once; later runs only count them.
func TestRunningSweepRemovesMarkerlessDirsOnceWhenTheStartupSweepWasSkipped(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	data := n.e.cfg.DataDir
	first := filepath.Join(data, "topics", "first")
	writeDir(t, first, "")
	sweepOnce(t, func() SweepResult { return n.e.runningSweep(n.ctx()) })
	if exists(first) {
		t.Fatal("the first running sweep after a skipped startup sweep kept a marker-less dir")
	}
	later := filepath.Join(data, "topics", "later")
	writeDir(t, later, "")
	if res := sweepOnce(t, func() SweepResult { return n.e.runningSweep(n.ctx()) }); !exists(later) || res.Markerless != 1 {
		t.Fatalf("a later running sweep removed a marker-less dir (%+v)", res)
	}
}

// TestOrphanSweepRemovesDeletedTopicDataOnlyAfterLeaderConfirmation (MV-35, moved here from the
// stale-copy sweep, which no longer removes a deleted topic's data): a topic dir whose marker
// names an incarnation the replica no longer knows, and a .stale/<topic>@<inc> dir, are removed
// once the leader confirms the incarnation gone, never before; a marker-less dir of an unknown
// topic is only counted at runtime; a .stale dir of the live incarnation is kept.
func TestOrphanSweepRemovesDeletedTopicDataOnlyAfterLeaderConfirmation(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	live := n.createTopic(service.CreateTopicRequest{Name: "live"})
	// A sweep needs a caught-up replica, which Raft reports moments after an apply returns.
	testwait.For(t, 5*time.Second, "the replica to be caught up", n.e.meta.AppliedCaughtUp)
	sweepOnce(t, func() SweepResult { return n.e.SweepOrphans(n.ctx()) }) // the startup sweep, on a data dir holding only the live topic
	data := n.e.cfg.DataDir
	gone := filepath.Join(data, "topics", "gone")
	orphan := filepath.Join(data, "topics", "orphan")
	staleGone := filepath.Join(data, ".stale", "live@fedcba9876543210")
	staleLive := filepath.Join(data, ".stale", "live@"+live.Incarnation)
	writeDir(t, gone, "fedcba9876543210")
	writeDir(t, orphan, "")
	writeDir(t, staleGone, "")
	writeDir(t, staleLive, "")

	setFault(t, FaultSweepConfirm) // every leader read unconfirmed
	res := sweepOnce(t, func() SweepResult { return n.e.runningSweep(n.ctx()) })
	for _, d := range []string{gone, orphan, staleGone, staleLive} {
		if !exists(d) {
			t.Fatalf("%s removed without a leader confirmation", d)
		}
	}
	if res.Removed != 0 || testutil.ToFloat64(n.m.OrphanTopicDirs) != 1 {
		t.Fatalf("result %+v, narad_orphan_topic_dirs %v; want nothing removed, the marker-less dir counted",
			res, testutil.ToFloat64(n.m.OrphanTopicDirs))
	}

	faults.Clear(FaultSweepConfirm)
	// A leader read can still miss its deadline on a loaded machine; the next pass confirms.
	removed := 0
	testwait.For(t, 10*time.Second, "the confirmed-gone incarnation's dirs to be removed", func() bool {
		res = n.e.runningSweep(n.ctx())
		removed += res.Removed
		return !exists(gone) && !exists(staleGone)
	})
	if !exists(staleLive) {
		t.Fatal("a .stale dir naming the live incarnation was removed")
	}
	if !exists(orphan) || testutil.ToFloat64(n.m.OrphanTopicDirs) != 1 {
		t.Fatal("the running sweep removed a marker-less dir (the startup sweep's job) or stopped counting it")
	}
	if removed != 2 {
		t.Fatalf("%d removed in all, want 2", removed)
	}
}

// TestOrphanSweepLeavesLiveTopicsCopiesAndStagingToTheirOwners: the orphan sweep never acts on
// the kinds it does not own: a copy of a live topic's partition that another node owns (the
// stale-copy sweep judges it), and a move's staging directory and note (the move worker's).
func TestOrphanSweepLeavesLiveTopicsCopiesAndStagingToTheirOwners(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(tp, 0, "elsewhere now")
	n.moveAway("t", 0, "") // owner n2: the copy here is stale
	dirs := datadir.New(n.e.cfg.DataDir)
	staging := dirs.StagingDir("t", 1)
	note := datadir.UnverifiableNotePath(staging)
	writeFileOfSize(t, filepath.Join(staging, "00000000000000000000.log"), 10)
	writeFileOfSize(t, note, 10)

	// A sweep that is not caught up does nothing at all, which would prove nothing here.
	testwait.For(t, 5*time.Second, "the replica to be caught up", n.e.meta.AppliedCaughtUp)
	for _, sweep := range []func(context.Context) SweepResult{n.e.SweepOrphans, n.e.runningSweep} {
		if res := sweep(n.ctx()); res.Removed != 0 {
			t.Fatalf("result %+v, want nothing removed", res)
		}
		for _, d := range []string{n.partDir("t", 0), staging, note} {
			if !exists(d) {
				t.Fatalf("the orphan sweep removed %s, which it does not own", d)
			}
		}
	}
}
