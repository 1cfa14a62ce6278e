package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/service"
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
		if err := os.WriteFile(filepath.Join(dir, incarnationFile), []byte(marker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

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

	res := n.e.SweepOrphans(n.ctx())
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
	n.e.SweepOrphans(n.ctx()) // the startup sweep, on an empty data dir
	data := n.e.cfg.DataDir
	orphan := filepath.Join(data, "topics", "orphan")
	deadInc := filepath.Join(data, "topics", "gone")
	writeDir(t, orphan, "")
	writeDir(t, deadInc, "fedcba9876543210")

	res := n.e.runningSweep(n.ctx())
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
	if res := n.e.SweepOrphans(n.ctx()); exists(orphan) || res.Removed != 1 {
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
	n.e.runningSweep(n.ctx())
	if exists(first) {
		t.Fatal("the first running sweep after a skipped startup sweep kept a marker-less dir")
	}
	later := filepath.Join(data, "topics", "later")
	writeDir(t, later, "")
	if res := n.e.runningSweep(n.ctx()); !exists(later) || res.Markerless != 1 {
		t.Fatalf("a later running sweep removed a marker-less dir (%+v)", res)
	}
}
