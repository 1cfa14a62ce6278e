package engine

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/errcode"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/transfer"
)

// stageCopy writes a closed log with n records into dir (a staged copy), with marker if
// non-nil, and returns the marker's bytes.
func stageCopy(t *testing.T, dir string, n int, marker *transfer.Marker) []byte {
	t.Helper()
	l, err := plog.Open(dir, plog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Commit([]plog.Entry{{Payload: []byte("staged")}}, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if marker == nil {
		return nil
	}
	if err := transfer.WriteMarker(dir, *marker); err != nil {
		t.Fatal(err)
	}
	b, err := transfer.ReadMarkerRaw(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nextOffsetOf recovers the closed log in dir and returns its next offset.
func nextOffsetOf(t *testing.T, dir string) int64 {
	t.Helper()
	l, err := plog.Open(dir, plog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.NextOffset()
}

func readIncarnationT(t *testing.T, topicDir string) string {
	t.Helper()
	v, ok, err := datadir.ReadIncarnation(topicDir)
	if err != nil || !ok {
		t.Fatalf("marker of %s: %q %v %v", topicDir, v, ok, err)
	}
	return v
}

// TestPrepareTopicDirRefusesWhenTheRecordChangedUnderTheGuard (MV-34): a delete and recreate
// between the worker's record read and the guard → refused; the successor's live directory is
// neither set aside nor re-stamped with the deleted id.
func TestPrepareTopicDirRefusesWhenTheRecordChangedUnderTheGuard(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	old := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(old, 0, "old")
	if err := n.e.DeleteTopic(n.ctx(), "t"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool { return isGone(n.topicDir("t")) }, "old incarnation purged")
	succ := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(succ, 0, "successor")

	err := n.e.PrepareTopicDir("t", old.Incarnation)
	if !errors.Is(err, transfer.ErrIncarnationChanged) {
		t.Fatalf("PrepareTopicDir(old incarnation) = %v, want ErrIncarnationChanged", err)
	}
	if got := readIncarnationT(t, n.topicDir("t")); got != succ.Incarnation {
		t.Fatalf("marker %q, want the successor's %q", got, succ.Incarnation)
	}
	if fileExists(filepath.Join(n.dir, ".stale")) {
		t.Fatal("the successor's directory was set aside")
	}
	if msgs := n.replay(succ, 0); len(msgs) != 1 || string(msgs[0].Payload) != "successor" {
		t.Fatalf("successor's records after the refused preparation: %v", msgs)
	}
	if err := n.e.PrepareTopicDir("absent", "0123456789abcdef"); !errors.Is(err, transfer.ErrIncarnationChanged) {
		t.Fatalf("PrepareTopicDir(unknown topic) = %v, want ErrIncarnationChanged", err)
	}
}

// TestPrepareTopicDirSetsAsideADeletedIncarnationsDir: a topic dir whose marker names another
// incarnation goes to .stale/<topic>@<old> whole, and the dir is re-stamped for the new one.
func TestPrepareTopicDirSetsAsideADeletedIncarnationsDir(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	writeDir(t, n.topicDir("t"), "fedcba9876543210")
	if err := n.e.PrepareTopicDir("t", tp.Incarnation); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(n.dir, ".stale", "t@fedcba9876543210")
	if !fileExists(filepath.Join(stale, "p00000", "00000000000000000000.log")) {
		t.Fatal("the deleted incarnation's dir was not set aside whole")
	}
	if got := readIncarnationT(t, n.topicDir("t")); got != tp.Incarnation {
		t.Fatalf("marker %q, want %q", got, tp.Incarnation)
	}
	if fileExists(n.partDir("t", 0)) {
		t.Fatal("the old partition dir stayed under the path")
	}
}

// TestInstallQuarantinesAnOldCopyWithUnexpiredRecords (MV-32): the install meets this node's
// own earlier copy holding unexpired records → it is renamed to pNNNNN.quarantine intact and
// logged at error level with path, reason and records; the staged copy takes the path.
func TestInstallQuarantinesAnOldCopyWithUnexpiredRecords(t *testing.T) {
	n, sink := startCapturingNode(t)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(tp, 0, "old-0", "old-1", "old-2") // the log is open here
	staging := n.e.StagingDir("t", 0)
	if want := filepath.Join(n.dir, ".moves", "t-0"); staging != want {
		t.Fatalf("StagingDir = %s, want %s", staging, want)
	}
	stageCopy(t, staging, 5, nil)

	if err := n.e.Install("t", 0, tp.Incarnation, staging); err != nil {
		t.Fatal(err)
	}
	path := n.e.PartitionDir("t", 0)
	q := path + ".quarantine"
	if got := nextOffsetOf(t, q); got != 3 {
		t.Fatalf("quarantined copy ends at %d, want the old 3 records", got)
	}
	if fileExists(staging) {
		t.Fatal("staging still exists after the install")
	}
	if got := nextOffsetOf(t, path); got != 5 {
		t.Fatalf("installed copy ends at %d, want 5", got)
	}
	lines := sink.Find(slog.LevelError, "quarantined this node's earlier copy")
	if len(lines) != 1 {
		t.Fatalf("error lines %+v, want one", lines)
	}
	a := lines[0].Attrs
	if a["path"] != path || a["quarantined_to"] != q || a["reason"] != "unexpired_records" || a["records"] != int64(3) {
		t.Fatalf("error line attrs %v", a)
	}
	if got := testutil.ToFloat64(n.m.QuarantinedCopies); got != 1 {
		t.Fatalf("narad_quarantined_copies = %v, want 1", got)
	}

	// A second install meeting a copy with records again takes a suffixed name.
	staging2 := n.e.StagingDir("t", 0)
	stageCopy(t, staging2, 2, nil)
	if err := n.e.Install("t", 0, tp.Incarnation, staging2); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(n.topicDir("t"))
	var quarantined []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".quarantine") {
			quarantined = append(quarantined, e.Name())
		}
	}
	if len(quarantined) != 2 || nextOffsetOf(t, path) != 2 {
		t.Fatalf("quarantined %v, path next %d; want two quarantined copies and the 2-record install", quarantined, nextOffsetOf(t, path))
	}
}

// TestInstallReplacesAnEmptyOldCopy (MV-32): an earlier copy without records is removed, not
// quarantined.
func TestInstallReplacesAnEmptyOldCopy(t *testing.T) {
	n, sink := startCapturingNode(t)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	if msgs := n.replay(tp, 0); len(msgs) != 0 { // opens the log: an empty copy at the path
		t.Fatalf("unexpected records %v", msgs)
	}
	if !fileExists(n.partDir("t", 0)) {
		t.Fatal("no empty copy at the path")
	}
	staging := n.e.StagingDir("t", 0)
	stageCopy(t, staging, 4, nil)
	if err := n.e.Install("t", 0, tp.Incarnation, staging); err != nil {
		t.Fatal(err)
	}
	if fileExists(n.partDir("t", 0) + ".quarantine") {
		t.Fatal("an empty copy was quarantined")
	}
	if len(sink.Find(slog.LevelError, "quarantined")) != 0 {
		t.Fatal("an empty copy was logged as quarantined")
	}
	if msgs := n.replay(tp, 0); len(msgs) != 4 {
		t.Fatalf("after install the owner serves %d records, want 4", len(msgs))
	}
}

// TestInstallRefusesWhenTheTopicDirNamesAnotherIncarnation: the install runs only while the
// marker still names the prepared incarnation; a refused install moves nothing.
func TestInstallRefusesWhenTheTopicDirNamesAnotherIncarnation(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(tp, 0, "live")
	staging := n.e.StagingDir("t", 0)
	stageCopy(t, staging, 2, nil)
	err := n.e.Install("t", 0, "0000000000000000", staging)
	if !errors.Is(err, transfer.ErrIncarnationChanged) {
		t.Fatalf("Install = %v, want ErrIncarnationChanged", err)
	}
	if !fileExists(staging) || nextOffsetOf(t, staging) != 2 {
		t.Fatal("a refused install touched the staged copy")
	}
	if msgs := n.replay(tp, 0); len(msgs) != 1 || string(msgs[0].Payload) != "live" {
		t.Fatalf("a refused install touched the path: %v", msgs)
	}
}

// TestRenameBackMovesOnlyThisInstall: RenameBack refuses a path holding another install's
// marker or a topic dir of another incarnation (ErrNotInstalled, nothing moves); with the
// right marker it takes the path back to staging, replacing a leftover staging dir.
func TestRenameBackMovesOnlyThisInstall(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	if err := n.e.PrepareTopicDir("t", tp.Incarnation); err != nil {
		t.Fatal(err)
	}
	staging := n.e.StagingDir("t", 0)
	mine := stageCopy(t, staging, 3, &transfer.Marker{Topic: "t", Partition: 0, Incarnation: tp.Incarnation,
		From: "n0", To: "n1", HWM: 3, InstalledAtMs: 1, DurableAtMs: 1})
	if err := n.e.Install("t", 0, tp.Incarnation, staging); err != nil {
		t.Fatal(err)
	}
	other := transfer.EncodeMarker(transfer.Marker{Topic: "t", Partition: 0, Incarnation: tp.Incarnation,
		From: "n0", To: "n1", HWM: 3, InstalledAtMs: 2, DurableAtMs: 2})
	path := n.e.PartitionDir("t", 0)

	cases := []struct {
		name        string
		incarnation string
		marker      []byte
		wantIs      []error
	}{
		{"another install's marker", tp.Incarnation, other, []error{transfer.ErrNotInstalled}},
		{"no marker given", tp.Incarnation, nil, []error{transfer.ErrNotInstalled}},
		{"another incarnation", "0000000000000000", mine, []error{transfer.ErrNotInstalled, transfer.ErrIncarnationChanged}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := n.e.RenameBack("t", 0, tc.incarnation, staging, tc.marker)
			for _, want := range tc.wantIs {
				if !errors.Is(err, want) {
					t.Fatalf("RenameBack = %v, want %v", err, want)
				}
			}
			if !fileExists(filepath.Join(path, transfer.MarkerFile)) || fileExists(staging) {
				t.Fatal("a refused rename back moved something")
			}
		})
	}

	writeFileOfSize(t, filepath.Join(staging, "leftover"), 1)
	if err := n.e.RenameBack("t", 0, tp.Incarnation, staging, mine); err != nil {
		t.Fatal(err)
	}
	if fileExists(path) {
		t.Fatal("the install is still on the path")
	}
	if fileExists(filepath.Join(staging, "leftover")) || nextOffsetOf(t, staging) != 3 {
		t.Fatal("staging does not hold exactly the renamed-back install")
	}
	if err := n.e.RenameBack("t", 0, tp.Incarnation, staging, mine); !errors.Is(err, transfer.ErrNotInstalled) {
		t.Fatalf("second RenameBack = %v, want ErrNotInstalled", err)
	}
}

// TestDropConsumerStateClosesTheOpenLog: an earlier ownership's open log and consume shard
// are closed, so nothing of the old state survives into a new copy.
func TestDropConsumerStateClosesTheOpenLog(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	tp := n.createTopic(service.CreateTopicRequest{Name: "t"})
	n.mustCommit(tp, 0, "a")
	msgs, err := n.e.Consume(n.ctx(), tp, queueReq(0, 1))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("reserve: %v %v", msgs, err)
	}
	pt := n.e.parts.Peek("t", 0)
	if pt == nil || pt.Shard() == nil {
		t.Fatal("no open log with a shard before the drop")
	}
	n.e.DropConsumerState("t", 0)
	if n.e.parts.Peek("t", 0) != nil {
		t.Fatal("the log is still registered after DropConsumerState")
	}
	closed, shard := pt.Closed(), pt.Shard()
	if !closed || shard != nil {
		t.Fatalf("partition closed=%v shard=%v after DropConsumerState", closed, shard)
	}
	n.e.DropConsumerState("t", 0) // nothing open: a no-op
	// MV-19: a lease of the dropped state never reaches the reopened copy: its ack is 410.
	errs := n.e.AckLocal(tp, []service.AckEntry{ackEntry(t, msgs[0], service.OpAck)})
	if len(errs) != 1 || !errors.Is(errs[0], errcode.ErrStale) {
		t.Fatalf("ack of a lease from before the drop = %v, want ErrStale (410)", errs)
	}
}
