package sweep

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

const hourMs = int64(time.Hour / time.Millisecond)

// TestSweepQuarantinesWithoutRecoveryOnEachOwnerCondition (MV-30): with unexpired local
// records, each of §9.3 a–d quarantines the copy untouched (its temp file, which a recovery
// would remove, is still there) with one error line naming path, reason, owner and vouched
// position; with all of them false the copy is recovered and removed when its next offset ≤ V,
// quarantined when ahead; a copy without unexpired records is removed.
func TestSweepQuarantinesWithoutRecoveryOnEachOwnerCondition(t *testing.T) {
	const records = 4 // one record per segment: bases 0..3, the empty active segment 4
	cases := []struct {
		name        string
		retentionMs int64
		ageSegments time.Duration // local segment mtimes are moved back this much
		listing     func(e *env) transfer.Listing
		wantReason  string // "" → removed
		wantVouched int64
		recovered   bool // the quarantine came after a recovery
	}{
		{
			name:       "a: the owner lists no records",
			listing:    func(e *env) transfer.Listing { return transfer.Listing{Incarnation: incA} },
			wantReason: ReasonOwnerListsNoRecords,
		},
		{
			name:        "b: the owner holds records but no marker",
			listing:     func(e *env) transfer.Listing { return e.mirror("t", incA, records) },
			wantReason:  ReasonOwnerHasNoMarker,
			wantVouched: records,
		},
		{
			name: "c: the owner's marker records a move from another node",
			listing: func(e *env) transfer.Listing {
				l := e.mirror("t", incA, records)
				l.Marker = markerBytes("n3", records, e.clock.Now(), true)
				return l
			},
			wantReason:  ReasonMarkerFromAnotherNode,
			wantVouched: records,
		},
		{
			name: "d: a segment below V is missing on the owner",
			listing: func(e *env) transfer.Listing {
				l := e.mirror("t", incA, records)
				l.Segments = append(l.Segments[:1:1], l.Segments[2:]...)
				l.Marker = markerBytes(self, records, e.clock.Now(), true)
				return l
			},
			wantReason:  ReasonSegmentNotOnOwner,
			wantVouched: records,
		},
		{
			name: "d: a sealed segment is shorter on the owner",
			listing: func(e *env) transfer.Listing {
				l := e.mirror("t", incA, records)
				l.Segments[2].Size -= 10
				l.Marker = markerBytes(self, records, e.clock.Now(), true)
				return l
			},
			wantReason:  ReasonSegmentNotOnOwner,
			wantVouched: records,
		},
		{
			name: "an unreadable owner marker is treated as none",
			listing: func(e *env) transfer.Listing {
				l := e.mirror("t", incA, records)
				l.Marker = []byte(`{"crc":"00000000","v":1}`)
				return l
			},
			wantReason:  ReasonOwnerMarkerUnreadable,
			wantVouched: records,
		},
		{
			name: "all false and the copy within V: removed",
			listing: func(e *env) transfer.Listing {
				l := e.mirror("t", incA, records+3)
				l.Marker = markerBytes(self, records, e.clock.Now(), true)
				return l
			},
			wantVouched: records, // capped at the marker's hwm
		},
		{
			name: "all false but the copy ahead of V: quarantined after recovery",
			listing: func(e *env) transfer.Listing {
				l := e.mirror("t", incA, records)
				l.Marker = markerBytes(self, 2, e.clock.Now(), true) // force-promoted at 2
				return l
			},
			wantReason:  ReasonAheadOfVouched,
			wantVouched: 2,
			recovered:   true,
		},
		{
			name:        "no unexpired records: removed even when the owner lists none",
			retentionMs: hourMs,
			ageSegments: 2 * time.Hour,
			listing:     func(e *env) transfer.Listing { return transfer.Listing{Incarnation: incA} },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.topic("t", incA, tc.retentionMs)
			dir := e.localCopy("t", incA, records)
			if tc.ageSegments > 0 {
				old := e.clock.Now().Add(-tc.ageSegments)
				for _, l := range e.mirror("t", incA, 0).Segments {
					_ = os.Chtimes(filepath.Join(dir, plog.SegmentFileName(l.Base)), old, old)
				}
			}
			e.setListing("t", tc.listing(e))
			e.sweep()

			q := dir + ".quarantine"
			if exists(dir) {
				t.Fatal("the stale copy is still at the partition path")
			}
			if tc.wantReason == "" {
				if exists(q) {
					t.Fatal("a copy that had to be removed was quarantined")
				}
				if n := e.logs.CountAtLeast(slog.LevelError); n != 0 {
					t.Fatalf("%d error lines for a removal", n)
				}
				return
			}
			if !exists(q) {
				t.Fatal("the copy was not quarantined")
			}
			if got := exists(filepath.Join(q, "probe.tmp-recovery")); got == tc.recovered {
				t.Fatalf("temp file present=%v: recovered=%v, want recovered=%v", got, !got, tc.recovered)
			}
			lines := e.logs.Find(slog.LevelError, "stale copy quarantined")
			if len(lines) != 1 {
				t.Fatalf("error lines %+v, want exactly one", lines)
			}
			a := lines[0].Attrs
			if a["reason"] != tc.wantReason || a["path"] != dir || a["owner"] != owner || a["vouched"] != tc.wantVouched {
				t.Fatalf("decision line %v, want reason %s path %s owner %s vouched %d", a, tc.wantReason, dir, owner, tc.wantVouched)
			}
			if got := testutil.ToFloat64(e.m.QuarantinedCopies); got != 1 {
				t.Fatalf("narad_quarantined_copies = %v, want 1", got)
			}
		})
	}
}

// TestSweepLeavesCopiesOfLegacyMarkersForFiveMinutes (MV-31): an owner marker without
// durable_at_ms leaves the copy untouched until the install is 5 minutes old.
func TestSweepLeavesCopiesOfLegacyMarkersForFiveMinutes(t *testing.T) {
	e := newEnv(t)
	e.topic("t", incA, 0)
	dir := e.localCopy("t", incA, 3)
	l := e.mirror("t", incA, 3)
	l.Marker = markerBytes(self, 3, e.clock.Now().Add(-time.Minute), false)
	e.setListing("t", l)

	e.sweep()
	e.clock.Step(3*time.Minute + 59*time.Second)
	e.sweep()
	if !exists(dir) || !exists(filepath.Join(dir, "probe.tmp-recovery")) {
		t.Fatal("the copy was touched before the legacy install was 5 minutes old")
	}
	e.clock.Step(2 * time.Second)
	e.sweep()
	if exists(dir) || exists(dir+".quarantine") {
		t.Fatal("the copy was not reclaimed once the legacy install was 5 minutes old")
	}
	if len(e.logs.Find(slog.LevelInfo, "reclaimed a stale copy")) != 1 {
		t.Fatal("no info line for the reclaim")
	}
}

// TestSweepDefersWhileItCannotJudge: nothing happens, and nothing is logged at warn or above,
// while the replica lags, the leader cannot confirm ownership, the owner is unknown or cannot
// be asked; a copy this node owns or is the target of is never judged.
func TestSweepDefersWhileItCannotJudge(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *env)
		asks  bool // the owner is asked for its listing
	}{
		{"replica not caught up", func(e *env) { e.store.caughtUp = false }, false},
		{"leader read unconfirmed", func(e *env) { e.store.confirmErr = meta.ErrUnconfirmed }, false},
		{"owner has no member record", func(e *env) { delete(e.store.members, owner) }, false},
		{"owner cannot be asked", func(e *env) { e.src.err = transfer.ErrUnavailable }, true},
		{"owner no longer owns it", func(e *env) { e.src.err = transfer.ErrNotOwner }, true},
		{"owned here", func(e *env) { e.store.assigns[akey("t", 0)] = meta.Assignment{Topic: "t", Owner: self} }, false},
		{"moving here", func(e *env) {
			e.store.assigns[akey("t", 0)] = meta.Assignment{Topic: "t", Owner: owner, Target: self}
		}, false},
		{"a follower here", func(e *env) {
			e.store.assigns[akey("t", 0)] = meta.Assignment{Topic: "t", Owner: owner,
				Replicas: []string{owner, self}, ISR: []string{owner}, LeaderEpoch: 2}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.topic("t", incA, 0)
			dir := e.localCopy("t", incA, 2)
			e.setListing("t", transfer.Listing{Incarnation: incA}) // would quarantine (a)
			tc.setup(e)
			e.sweep()
			if !exists(filepath.Join(dir, "probe.tmp-recovery")) || exists(dir+".quarantine") {
				t.Fatal("the sweep acted although it could not judge")
			}
			if asked := e.src.lists > 0; asked != tc.asks {
				t.Fatalf("owner asked=%v, want %v", asked, tc.asks)
			}
			if n := e.logs.CountAtLeast(slog.LevelWarn); n != 0 {
				t.Fatalf("%d lines at warn or above while deferring", n)
			}
		})
	}
}

// TestSweepReadsTheIncarnationBeforeOwnership (MV-33): a delete and recreate lands between
// the incarnation read and the ownership confirmation, with the successor's partition placed
// on this node and its directory opened under the path: the successor's directory is
// untouched.
func TestSweepReadsTheIncarnationBeforeOwnership(t *testing.T) {
	e := newEnv(t)
	e.topic("t", incA, 0)
	e.localCopy("t", incA, 2)
	e.setListing("t", transfer.Listing{Incarnation: incB}) // would quarantine (a) if judged
	e.store.afterConfirm = func(s *fakeStore) {
		// Delete + recreate: the old dir is purged, the successor (incB) is placed here and its
		// partition opened under the same path.
		s.mu.Lock()
		s.topics["t"] = meta.Topic{Name: "t", Partitions: 1, Incarnation: incB}
		s.assigns[akey("t", 0)] = meta.Assignment{Topic: "t", Partition: 0, Owner: self}
		s.mu.Unlock()
		if err := os.RemoveAll(e.topicDir("t")); err != nil {
			t.Error(err)
		}
		e.localCopy("t", incB, 3)
	}
	e.sweep()
	if !exists(filepath.Join(e.partDir("t"), "probe.tmp-recovery")) || exists(e.partDir("t")+".quarantine") {
		t.Fatal("the successor's directory was touched")
	}
	if b, _ := os.ReadFile(filepath.Join(e.topicDir("t"), ".incarnation")); string(b) != incB+"\n" {
		t.Fatalf("successor's marker %q", b)
	}
}

// TestStaleCopySweepLeavesDeletedTopicsDataToTheOrphanSweep: a deleted topic's data has one
// remover, the engine's orphan sweep (engine.TestOrphanSweepRemovesDeletedTopicDataOnlyAfterLeaderConfirmation
// holds MV-35's removal rule now). Even with the leader confirming the incarnations gone, this
// sweep leaves alone a topic dir whose marker names a deleted incarnation, a marker-less dir
// of an unknown topic and every .stale dir, and does not touch narad_orphan_topic_dirs. If it
// ever acts on one of them again, two sweeps remove the same kind on two schedules.
func TestStaleCopySweepLeavesDeletedTopicsDataToTheOrphanSweep(t *testing.T) {
	e := newEnv(t)
	gone := e.localCopy("gone", incA, 1)
	orphan := e.localCopy("orphan", "", 1)
	staleGone := filepath.Join(e.dir, ".stale", "live@"+incA)
	staleLive := filepath.Join(e.dir, ".stale", "live@"+incB)
	for _, d := range []string{staleGone, staleLive} {
		if err := os.MkdirAll(filepath.Join(d, "p00000"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.store.topics["live"] = meta.Topic{Name: "live", Partitions: 1, Incarnation: incB}
	e.m.OrphanTopicDirs.Set(7) // whatever the orphan sweep last counted
	e.sweep()
	for _, d := range []string{gone, e.topicDir("gone"), orphan, staleGone, staleLive} {
		if !exists(d) {
			t.Fatalf("the stale-copy sweep removed %s, a deleted topic's data the orphan sweep owns", d)
		}
	}
	if n := e.src.lists; n != 0 {
		t.Fatalf("the owner was asked %d times about a deleted topic's copy", n)
	}
	if got := testutil.ToFloat64(e.m.OrphanTopicDirs); got != 7 {
		t.Fatalf("narad_orphan_topic_dirs = %v, want the orphan sweep's 7 untouched", got)
	}
	if n := e.logs.CountAtLeast(slog.LevelInfo); n != 0 {
		t.Fatalf("%d decision lines about data this sweep does not own", n)
	}
}

// TestJudgeVouchesAtMostTheOwnerMarkersHWM: V = owner HWM capped at the marker's hwm, and the
// segment check ignores local segments at or above V.
func TestJudgeVouchesAtMostTheOwnerMarkersHWM(t *testing.T) {
	l := transfer.Listing{HighWatermark: 10, Segments: []transfer.Segment{{Base: 0, Size: 100, Sealed: true}, {Base: 5, Size: 10}},
		Marker: transfer.EncodeMarker(transfer.Marker{Topic: "t", From: self, To: owner, HWM: 7, DurableAtMs: 1})}
	local := []localSegment{{base: 0, size: 100, unexpired: true}, {base: 5, size: 50, unexpired: true}, {base: 7, size: 9, unexpired: true}}
	v, m, reason := judge(l, local, self)
	if v != 7 || reason != "" || m.HWM != 7 {
		t.Fatalf("judge = (%d, %+v, %q), want V 7 and no reason", v, m, reason)
	}
	l.HighWatermark = 6
	if v, _, _ := judge(l, local, self); v != 6 {
		t.Fatalf("V = %d, want the owner HWM 6 below the marker's 7", v)
	}
	local[0].size = 101 // the owner's sealed segment is shorter than ours
	if _, _, reason := judge(l, local, self); reason != ReasonSegmentNotOnOwner {
		t.Fatalf("reason %q, want %s", reason, ReasonSegmentNotOnOwner)
	}
	local[0].unexpired = false // only unexpired local segments count
	if _, _, reason := judge(l, local, self); reason != "" {
		t.Fatalf("reason %q for an expired segment", reason)
	}
}

// TestSweepReportsOnlyAnUnlistableDataDir: Sweep's error is for what it cannot do at all.
func TestSweepReportsOnlyAnUnlistableDataDir(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.dir, "topics"), nil, 0o644); err != nil { // not a dir
		t.Fatal(err)
	}
	if err := e.sw.Sweep(t.Context()); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Sweep over an unlistable topics dir = %v, want an error", err)
	}
}

// MV-37 (docs/internals/moves.md §9.6): a destination that died with its flip unconfirmed comes back
// after the controller cleared the move; the install it left at the partition path carries
// its own move marker (a copy of the owner's records, from the owner to this node). The sweep
// never trusts a copy's own marker: the owner, which never got the partition from that
// install, holds no marker vouching for it, so the copy is quarantined untouched, not reclaimed.
func TestSweepQuarantinesAnUnconfirmedInstallDespiteItsOwnMarker(t *testing.T) {
	const records = 4
	e := newEnv(t)
	e.topic("t", incA, 0)
	dir := e.localCopy("t", incA, records)
	own := transfer.Marker{Topic: "t", Partition: 0, Incarnation: incA, From: owner, To: self, HWM: records,
		InstalledAtMs: e.clock.Now().UnixMilli(), DurableAtMs: e.clock.Now().UnixMilli()}
	if err := transfer.WriteMarker(dir, own); err != nil {
		t.Fatal(err)
	}
	e.setListing("t", e.mirror("t", incA, records)) // the owner's records, and no marker
	e.sweep()

	if exists(dir) {
		t.Fatal("the unconfirmed install is still at the partition path")
	}
	q := dir + ".quarantine"
	if !exists(q) {
		t.Fatal("the unconfirmed install was removed instead of quarantined")
	}
	if !exists(filepath.Join(q, transfer.MarkerFile)) || !exists(filepath.Join(q, "probe.tmp-recovery")) {
		t.Fatal("the quarantined copy was changed (recovered) on its way aside")
	}
	lines := e.logs.Find(slog.LevelError, "stale copy quarantined")
	if len(lines) != 1 || lines[0].Attrs["reason"] != ReasonOwnerHasNoMarker {
		t.Fatalf("decision lines %+v, want one with reason %s", lines, ReasonOwnerHasNoMarker)
	}
}

// A replicated partition whose leader-confirmed replica set no longer names this node (a
// reassignment dropped it) has its copy removed without asking the leader for a listing; a
// copy of a replica this node still holds is never touched.
func TestSweepRemovesTheCopyOfADroppedReplica(t *testing.T) {
	e := newEnv(t)
	e.store.mu.Lock()
	e.store.topics["r"] = meta.Topic{Name: "r", Partitions: 1, Incarnation: incA, ReplicationFactor: 2}
	e.store.assigns[akey("r", 0)] = meta.Assignment{Topic: "r", Partition: 0, Owner: owner,
		Replicas: []string{owner, self}, ISR: []string{owner, self}}
	e.store.mu.Unlock()
	dir := e.localCopy("r", incA, 3)
	e.sweep()
	if !exists(dir) {
		t.Fatal("the copy of a replica this node holds was removed")
	}
	e.store.mu.Lock()
	e.store.assigns[akey("r", 0)] = meta.Assignment{Topic: "r", Partition: 0, Owner: owner,
		Replicas: []string{owner, "n3"}, ISR: []string{owner, "n3"}}
	e.store.mu.Unlock()
	e.sweep()
	if exists(dir) || exists(dir+".quarantine") {
		t.Fatal("the dropped replica's copy was not removed")
	}
	if e.src.lists != 0 {
		t.Fatalf("%d owner listings asked for a replicated partition", e.src.lists)
	}
	if len(e.logs.Find(slog.LevelInfo, "no longer holds")) != 1 {
		t.Fatal("no info line for the removal")
	}
}
