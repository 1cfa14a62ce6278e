package move

import (
	"testing"
	"time"

	"narad.dev/broker/internal/transfer"
)

// MV-3: with light writes CatchUp converges (a pass copies ≤ lagBytes), so the freeze only
// covers a small tail and lasts briefly.
func TestCatchUpConvergesAndTheFreezeCoversOnlyASmallTail(t *testing.T) {
	h := newHarness(t, 16<<10)
	h.cfg.LagBytes = 8 << 10
	h.src.MustProduce(500, 200) // ~100 KiB bulk
	p := startProducer(h.src, 1, 200, 2*time.Millisecond)
	defer p.Stop()
	h.start()
	h.waitFlipped(10 * time.Second)
	p.Stop()
	h.checkInstalled()
	if n := h.logs.count("move: non-converged cutover"); n != 0 {
		t.Fatalf("light writes must converge; got %d non-converged cutovers", n)
	}
	if tail := h.src.frozenFetchedBytes.Load(); tail > 2*h.cfg.LagBytes {
		t.Fatalf("copied %d bytes under the freeze; a converged copy leaves ≤ ~lagBytes (%d)", tail, h.cfg.LagBytes)
	}
	h.src.mu.Lock()
	frozen := h.src.frozenFor
	h.src.mu.Unlock()
	if frozen <= 0 || frozen > 500*time.Millisecond {
		t.Fatalf("the source was frozen for %s from the arm to the flip; want one short freeze", frozen)
	}
}

// MV-4: writes faster than a throttled copy never converge; CatchUp stops after at most 20
// passes or 3 without a new minimum, logs a non-converged cutover, and the move completes.
func TestCatchUpIsBoundedWhenWritesOutrunTheCopy(t *testing.T) {
	h := newHarness(t, 64<<10)
	h.cfg.ChunkBytes = 4 << 10
	h.cfg.LagBytes = 1 << 10
	h.src.fetchDelay.Store(int64(time.Millisecond))
	h.src.MustProduce(100, 400)
	p := startProducer(h.src, 10, 400, time.Millisecond)
	defer p.Stop()
	h.start()
	h.waitFlipped(20 * time.Second)
	p.Stop()
	h.checkInstalled()
	recs := h.logs.find("move: non-converged cutover")
	if len(recs) != 1 {
		t.Fatalf("want one non-converged cutover log, got %d\n%s", len(recs), h.logs.dump())
	}
	if passes, ok := recs[0].attrs["passes"].(int64); !ok || passes > 20 || passes < 2 {
		t.Fatalf("non-converged after %v passes; the bound is 20", recs[0].attrs["passes"])
	}
}

// MV-9: a Finalize that drains for longer than the freeze TTL keeps the freeze alive by
// re-arming every TTL/4; it never lapses.
func TestReArmKeepsALongFinalizeFrozen(t *testing.T) {
	h := newHarness(t, 64<<10)
	h.cfg.FreezeTTL = 300 * time.Millisecond // re-armed every 75 ms
	h.cfg.ChunkBytes = 1 << 10
	h.cfg.FetchesInFlight = 1 // a drain of one slow chunk after another
	h.src.MustProduce(20, 100)
	h.src.onArm = func(s *fakeSource) {
		if s.arms.Load() == 1 { // a large tail lands just before the freeze
			if err := s.commitLocked(100, 100); err != nil {
				t.Errorf("commit: %v", err)
			}
		}
	}
	h.src.frozenSlow.Store(int64(60 * time.Millisecond)) // ~13 chunks: the drain outlives the TTL
	h.start()
	h.waitFlipped(20 * time.Second)
	h.checkInstalled()
	if h.src.lapsedRearms.Load() != 0 || h.src.fenceRefusals.Load() != 0 || h.src.arms.Load() != 1 {
		t.Fatalf("the freeze lapsed: refused re-arms=%d refused fences=%d arms=%d",
			h.src.lapsedRearms.Load(), h.src.fenceRefusals.Load(), h.src.arms.Load())
	}
	if h.src.rearms.Load() < 3 {
		t.Fatalf("only %d re-arms during a drain several TTLs long", h.src.rearms.Load())
	}
}

// MV-10, MV-11: the fence refuses (freeze lapsed with a record committed behind the copy, or
// the HWM drifted); the destination freezes again, drains the record and only then flips.
func TestRefusedFenceRefreezesAndTheRecordReachesTheCopy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lapse  bool
		reason error
	}{
		{"freeze lapsed (MV-10)", true, transfer.ErrFreezeLapsed},
		{"hwm drift (MV-11)", false, transfer.ErrHWMMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 4096)
			h.src.MustProduce(40, 100)
			var hwmAtFence int64
			h.src.onFence = func(s *fakeSource, n int64) {
				if n != 1 {
					return
				}
				if tc.lapse {
					s.deadline = time.Now().Add(-time.Millisecond)
				}
				if err := s.commitLocked(1, 100); err != nil { // lands behind the copy
					t.Errorf("commit: %v", err)
				}
				hwmAtFence = s.log.HighWatermark()
			}
			h.start()
			h.waitFlipped(10 * time.Second)
			if h.src.fenceRefusals.Load() != 1 || h.src.arms.Load() != 2 || h.loc.installs.Load() != 1 {
				t.Fatalf("refused fences=%d arms=%d installs=%d; want 1, 2, 1",
					h.src.fenceRefusals.Load(), h.src.arms.Load(), h.loc.installs.Load())
			}
			if m := h.checkInstalled(); m.HWM != hwmAtFence || hwmAtFence != 41 {
				t.Fatalf("installed hwm %d, the record committed at the fence made it %d", m.HWM, hwmAtFence)
			}
		})
	}
}

// MV-12: a listing can read the segments before an append and the HWM after it; Finalize
// stops only after two consecutive passes that copy nothing and report the same HWM.
func TestFinalizeStopsOnlyOnTwoQuietPassesWithTheSameHWM(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(30, 100)
	var racyAt int64
	h.src.onArm = func(s *fakeSource) { racyAt = s.lists.Load() + 1 }
	h.src.racyList = func(s *fakeSource, n int64) bool { return racyAt != 0 && n == racyAt }
	h.start()
	h.waitFlipped(10 * time.Second)
	if h.src.HWM() != 31 {
		t.Fatalf("setup: the racy append did not happen (hwm %d)", h.src.HWM())
	}
	h.checkInstalled()
	if n := h.logs.count("move: staged copy cannot be verified; copying once more from scratch"); n != 0 {
		t.Fatalf("Finalize stopped on the racy listing: %d verify failures", n)
	}
	if h.src.arms.Load() != 1 {
		t.Fatalf("arms=%d", h.src.arms.Load())
	}
}

// An older source returns no token: the destination re-arms by arming again, skips the
// fence, warns once, and the move still completes.
func TestTokenlessSourceIsReArmedByArmingAndNotFenced(t *testing.T) {
	h := newHarness(t, 4096)
	h.cfg.FreezeTTL = 200 * time.Millisecond
	h.src.noToken = true
	h.src.MustProduce(30, 100)
	h.src.frozenSlow.Store(int64(30 * time.Millisecond))
	h.cfg.ChunkBytes = 1 << 10
	h.cfg.FetchesInFlight = 1
	h.src.onArm = func(s *fakeSource) {
		if s.arms.Load() == 1 {
			_ = s.commitLocked(30, 100)
		}
	}
	h.start()
	h.waitFlipped(10 * time.Second)
	h.checkInstalled()
	if h.src.fences.Load() != 0 || h.src.rearms.Load() != 0 {
		t.Fatalf("a token-less source was fenced (%d) or re-armed by token (%d)", h.src.fences.Load(), h.src.rearms.Load())
	}
	if h.src.arms.Load() < 2 {
		t.Fatalf("a token-less freeze must be re-armed by arming again: arms=%d", h.src.arms.Load())
	}
	if n := h.logs.count("move: source returned no freeze token (older release); re-arming without a fence"); n != 1 {
		t.Fatalf("want one warning, got %d", n)
	}
}
