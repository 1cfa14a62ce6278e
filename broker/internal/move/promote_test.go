package move

import (
	"os"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

// killSource marks the source dead in the replica with a heartbeat stamp `age` old.
func (h *harness) killSource(age time.Duration) {
	h.st.putMember(meta.Member{ID: srcNode, ClusterAddr: srcAddr, Status: meta.MemberDead,
		LastHeartbeat: h.clock.Now().Add(-age).Unix()})
}

func (h *harness) reviveSource() {
	h.st.putMember(meta.Member{ID: srcNode, ClusterAddr: srcAddr, Status: meta.MemberAlive,
		LastHeartbeat: h.clock.Now().Unix()})
}

// waitAttempts waits for n more calls to the source (the worker's retries make progress).
func (h *harness) waitAttempts(what string, n int64) {
	h.t.Helper()
	start := h.src.lists.Load() + h.src.fetches.Load() + h.src.arms.Load()
	testwait.For(h.t, 10*time.Second, what, func() bool {
		return h.src.lists.Load()+h.src.fetches.Load()+h.src.arms.Load() >= start+n
	})
}

// MV-26: a dead source with an old heartbeat stamp is force-promoted only after this
// destination has watched it dead for 2 minutes on its own clock.
func TestForcePromoteWaitsForTwoMinutesOfOwnObservation(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(30, 100)
	h.src.downArm.Store(true) // the copy completes; the source cannot be frozen
	h.killSource(10 * time.Minute)
	h.start()
	h.waitAttempts("attempts against the dead source", 6)
	h.clock.Advance(2*time.Minute - time.Second)
	h.waitAttempts("more attempts", 6)
	if exists(h.path()) || h.st.completes.Load() != 0 {
		t.Fatal("force-promoted before 2 minutes of own observation, on an old stamp alone")
	}
	if rep, _ := h.report(); rep.Phase != transfer.PhaseWaitingForSource {
		t.Fatalf("phase %q, want waiting_for_source", rep.Phase)
	}
	h.clock.Advance(2 * time.Second)
	h.waitFlipped(10 * time.Second)
	testwait.For(t, 5*time.Second, "the force-promoted count", func() bool { return h.counter(outcomeForcePromoted) == 1 })
	m := h.checkInstalled()
	if !m.Force || m.HWM != 30 {
		t.Fatalf("marker %+v: want force at hwm 30", m)
	}
}

// MV-26: a destination restart restarts its own observation of the dead source.
func TestDestinationRestartRestartsTheDeadSourceClock(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(30, 100)
	h.src.downArm.Store(true)
	h.killSource(10 * time.Minute)
	h.start()
	h.waitAttempts("attempts", 6)
	h.clock.Advance(90 * time.Second)
	h.waitAttempts("attempts", 6)
	h.stop() // restart: the dead source's staging copy is set aside (it may be the last copy)
	if !exists(h.staging() + ".quarantine") {
		t.Fatal("the staging copy of a move from a dead source must be set aside, not removed")
	}
	h.start()
	h.waitAttempts("attempts after the restart", 6)
	h.clock.Advance(60 * time.Second) // 2.5 min since the first observation, 1 min since the restart
	h.waitAttempts("more attempts", 6)
	if exists(h.path()) || h.st.completes.Load() != 0 {
		t.Fatal("the restarted destination promoted on the observation of its previous life")
	}
	h.clock.Advance(61 * time.Second)
	h.waitFlipped(10 * time.Second)
	h.checkInstalled()
}

// MV-27: a source never reached cannot be force-promoted from.
func TestForcePromoteRefusedWhenTheSourceWasNeverReached(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(30, 100)
	h.src.down.Store(true)
	h.killSource(10 * time.Minute)
	h.start()
	h.waitAttempts("attempts", 4)
	h.clock.Advance(5 * time.Minute)
	h.waitAttempts("attempts past the wait", 8)
	if exists(h.path()) || h.st.completes.Load() != 0 {
		t.Fatal("promoted a copy of a source it never reached")
	}
	if n := h.logs.count("move: the source is dead and was never reached by this move, so it cannot force-promote"); n != 1 {
		t.Fatalf("want one error line, got %d", n)
	}
}

// MV-27: a copy behind the source's last listed HWM is not promoted: one error line per
// death, the source_dead_copy_behind gauge while blocked, and the move completes normally
// once the source returns.
func TestForcePromoteRefusedWhileTheCopyIsBehind(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(30, 100)
	h.src.downFetch.Store(true) // the source lists, but the copy never gets its bytes
	h.killSource(10 * time.Minute)
	h.start()
	h.waitAttempts("attempts", 4)
	h.clock.Advance(3 * time.Minute)
	const line = "move: the source is dead and this node's copy is behind its last high watermark, so it cannot force-promote"
	testwait.For(t, 5*time.Second, "the error line", func() bool { return h.logs.count(line) > 0 })
	h.clock.Advance(time.Minute)
	h.waitAttempts("more attempts", 10)
	recs := h.logs.find(line)
	if len(recs) != 1 || recs[0].level.String() != "ERROR" || recs[0].attrs["copy_next_offset"] != int64(0) ||
		recs[0].attrs["source_hwm"] != int64(30) {
		t.Fatalf("want the exact error line once with copy_next_offset 0 and source_hwm 30, got %+v", recs)
	}
	if got := h.blocked(transfer.BlockedSourceDeadCopyBehind); got != 1 {
		t.Fatalf("narad_moves_blocked{source_dead_copy_behind} = %v", got)
	}
	if rep, _ := h.report(); rep.BlockedReason != transfer.BlockedSourceDeadCopyBehind {
		t.Fatalf("report %+v", rep)
	}
	if exists(h.path()) || h.st.completes.Load() != 0 {
		t.Fatal("promoted a copy behind the source's high watermark")
	}
	h.reviveSource()
	h.src.downFetch.Store(false)
	h.waitFlipped(10 * time.Second)
	testwait.For(t, 5*time.Second, "the gauge to clear", func() bool { return h.blocked(transfer.BlockedSourceDeadCopyBehind) == 0 })
	if m := h.checkInstalled(); m.Force {
		t.Fatal("a move completed with the source back must not be a force-promote")
	}
}

// MV-28: a force-promote installs positions clamped to the promoted HWM.
func TestForcePromoteClampsPositionsToTheHWM(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(30, 100)
	h.src.setPositions(40, []int64{42}, []transfer.Cursor{{Child: childName, Record: cursorRecord(t, "epoch-7", 35)}})
	h.src.downArm.Store(true)
	h.killSource(10 * time.Minute)
	h.start()
	h.waitAttempts("attempts", 4)
	h.clock.Advance(2*time.Minute + time.Second)
	h.waitFlipped(10 * time.Second)
	c := readCheckpoint(t, h.path())
	if c.Frontier != 29 || len(c.AckedAhead) != 0 {
		t.Fatalf("checkpoint %+v, want frontier 29 and no acked-ahead", c)
	}
	b, err := os.ReadFile(cursorfile.Path(h.path(), childName))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cursorfile.Parse(b); err != nil || st.NextOffset != 30 {
		t.Fatalf("cursor %+v %v, want next 30", st, err)
	}
	if m := h.checkInstalled(); !m.Force {
		t.Fatal("not a force-promote")
	}
}

// docs/internals/moves.md §7 rule 8: a source that dies while the flip is unconfirmed leads to a
// force-promote flip of the installed copy, its marker rewritten with force first.
func TestSourceDeathWithAnUnconfirmedFlipForcePromotesTheInstall(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(30, 100)
	h.st.completeFn = func(n int64, apply casFn) (meta.CASResult, meta.Assignment, error) {
		if n == 1 {
			h.killSource(10 * time.Minute) // the source dies as the flip goes out
			h.src.down.Store(true)
			return 0, meta.Assignment{}, meta.ErrNoLeader
		}
		return apply()
	}
	h.start()
	testwait.For(t, 5*time.Second, "the unknown flip", func() bool { return h.st.completes.Load() == 1 })
	base := h.st.confirms.Load()
	testwait.For(t, 5*time.Second, "leader reads", func() bool { return h.st.confirms.Load() >= base+3 })
	if h.st.completes.Load() != 1 || h.owner() != srcNode {
		t.Fatal("re-proposed without a fence while the source was merely unreachable")
	}
	h.clock.Advance(2*time.Minute + time.Second)
	h.waitFlipped(10 * time.Second)
	if h.loc.renameBacks.Load() != 0 || h.loc.installs.Load() != 1 {
		t.Fatalf("renameBacks=%d installs=%d: the install must be flipped where it is", h.loc.renameBacks.Load(), h.loc.installs.Load())
	}
	if m := h.checkInstalled(); !m.Force {
		t.Fatal("the installed marker must be rewritten with force before a force flip")
	}
	testwait.For(t, 5*time.Second, "the force-promoted count", func() bool { return h.counter(outcomeForcePromoted) == 1 })
}
