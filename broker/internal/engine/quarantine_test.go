package engine

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/service"
	"narad.dev/broker/testutil/logrec"
)

// startCapturingNode boots a test node whose engine logs into the returned sink.
func startCapturingNode(t *testing.T) (*testNode, *logrec.Sink) {
	sink := &logrec.Sink{}
	n := startNode(t, t.TempDir(), func(c *Config) { c.Logger = sink.Logger() })
	return n, sink
}

func writeFileOfSize(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestQuarantineGaugesCountEveryCopySetAside: narad_quarantined_copies/bytes count every
// topics/*/pNNNNN.quarantine[-N], .moves/*.quarantine[-N] and .stale/* entry with its bytes,
// nothing else; the startup pass lists each one at error level with its path and bytes.
func TestQuarantineGaugesCountEveryCopySetAside(t *testing.T) {
	n, sink := startCapturingNode(t)
	d := n.dir
	// The engine's own startup listing runs first, over an empty data dir: what this test
	// lists and counts below is its explicit passes only.
	eventually(t, 10*time.Second, n.e.quarantineListed.Load, "the engine's startup quarantine listing")
	writeFileOfSize(t, filepath.Join(d, "topics", "t", "p00000.quarantine", "00000000000000000000.log"), 10)
	writeFileOfSize(t, filepath.Join(d, "topics", "t", "p00001.quarantine-1700000000", "00000000000000000000.log"), 5)
	writeFileOfSize(t, filepath.Join(d, ".moves", "t-0.quarantine", "00000000000000000000.log"), 7)
	writeFileOfSize(t, filepath.Join(d, ".stale", "t@0123456789abcdef", "p00000", "00000000000000000000.log"), 3)
	// Not quarantined copies: a partition, a staging copy, malformed names.
	writeFileOfSize(t, filepath.Join(d, "topics", "t", "p00002", "00000000000000000000.log"), 100)
	writeFileOfSize(t, filepath.Join(d, "topics", "t", "p0000.quarantine", "x"), 100)
	writeFileOfSize(t, filepath.Join(d, "topics", "t", "p00003.quarantine-x", "x"), 100)
	writeFileOfSize(t, filepath.Join(d, ".moves", "t-1", "00000000000000000000.log"), 100)
	writeFileOfSize(t, filepath.Join(d, ".moves", "t.quarantine", "x"), 100)

	n.e.pollQuarantine(true)
	if got := testutil.ToFloat64(n.m.QuarantinedCopies); got != 4 {
		t.Fatalf("narad_quarantined_copies = %v, want 4", got)
	}
	if got := testutil.ToFloat64(n.m.QuarantinedBytes); got != 25 {
		t.Fatalf("narad_quarantined_bytes = %v, want 25", got)
	}
	lines := sink.Find(slog.LevelError, "quarantined copy")
	paths := map[string]int64{}
	for _, l := range lines {
		paths[l.Attrs["path"].(string)] = l.Attrs["bytes"].(int64)
	}
	want := map[string]int64{
		filepath.Join(d, "topics", "t", "p00000.quarantine"):            10,
		filepath.Join(d, "topics", "t", "p00001.quarantine-1700000000"): 5,
		filepath.Join(d, ".moves", "t-0.quarantine"):                    7,
		filepath.Join(d, ".stale", "t@0123456789abcdef"):                3,
	}
	if len(paths) != len(want) {
		t.Fatalf("startup listing %v, want %v", paths, want)
	}
	for p, b := range want {
		if paths[p] != b {
			t.Fatalf("startup listing %v, want %v", paths, want)
		}
	}

	// A later poll only refreshes the gauges.
	before := len(sink.Find(slog.LevelError, "quarantined copy"))
	if err := os.RemoveAll(filepath.Join(d, ".moves", "t-0.quarantine")); err != nil {
		t.Fatal(err)
	}
	n.e.pollQuarantine(false)
	if got := testutil.ToFloat64(n.m.QuarantinedCopies); got != 3 {
		t.Fatalf("after removal narad_quarantined_copies = %v, want 3", got)
	}
	if after := len(sink.Find(slog.LevelError, "quarantined copy")); after != before {
		t.Fatalf("a periodic poll logged %d more lines", after-before)
	}
}

// TestStartupSweepKeepsQuarantinedCopiesOfLiveTopics: the orphan sweep never removes a
// quarantined copy of a live topic; it only counts it.
func TestStartupSweepKeepsQuarantinedCopiesOfLiveTopics(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	live := n.createTopic(service.CreateTopicRequest{Name: "live"})
	n.mustCommit(live, 0, "keep")
	q := filepath.Join(n.topicDir("live"), "p00000.quarantine")
	writeFileOfSize(t, filepath.Join(q, "00000000000000000000.log"), 42)
	res := sweepOnce(t, func() SweepResult { return n.e.SweepOrphans(n.ctx()) })
	if !fileExists(q) {
		t.Fatal("startup sweep removed a quarantined copy")
	}
	if res.Quarantined != 1 || res.QuarBytes != 42 {
		t.Fatalf("result %+v, want 1 quarantined copy of 42 bytes", res)
	}
}
