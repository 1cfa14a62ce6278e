package move

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/testwait"
)

type casFn = func() (meta.CASResult, meta.Assignment, error)

// MV-1: a re-plan that lands before the flip makes the CAS refuse it; the refused worker
// takes its install off the path and removes its staging copy.
func TestReplannedMoveFlipIsRefusedAndLeavesNoInstall(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(50, 100)
	h.st.completeFn = func(n int64, apply casFn) (meta.CASResult, meta.Assignment, error) {
		if n == 1 { // the controller re-plans the move onto another node just before our flip
			h.st.putAssignment(meta.Assignment{Topic: topicName, Partition: 0, Owner: srcNode, Target: otherNode})
		}
		return apply()
	}
	h.start()
	testwait.For(t, 5*time.Second, "the refused flip", func() bool { return h.st.completes.Load() >= 1 })
	testwait.For(t, 5*time.Second, "the worker to end", func() bool { return h.r.Workers() == 0 })
	a, _ := h.st.Assignment(topicName, 0)
	if a.Owner != srcNode || a.Target != otherNode {
		t.Fatalf("assignment %+v: the refused flip changed ownership", a)
	}
	if exists(h.path()) {
		t.Fatal("an install whose flip was refused stayed at the partition path")
	}
	if exists(h.staging()) {
		t.Fatal("the staging copy of a refused move survived")
	}
	if h.st.completes.Load() != 1 || h.counter(outcomeCompleted) != 0 {
		t.Fatalf("completes=%d completed=%v", h.st.completes.Load(), h.counter(outcomeCompleted))
	}
}

// MV-1: a re-plan mid-copy cancels the worker, which disposes of its staging copy.
func TestReplanMidCopyCancelsTheWorkerAndRemovesItsStaging(t *testing.T) {
	h := newHarness(t, 2048)
	h.src.MustProduce(200, 100)
	h.cfg.ChunkBytes = 1024
	h.src.fetchDelay.Store(int64(2 * time.Millisecond))
	var once sync.Once
	h.src.onFetch = func(s *fakeSource, base, at int64) {
		if s.fetches.Load() >= 5 { // ≥: concurrent fetches can both count past 5 before either looks
			once.Do(func() {
				h.st.putAssignment(meta.Assignment{Topic: topicName, Partition: 0, Owner: srcNode, Target: otherNode})
			})
		}
	}
	h.start()
	testwait.For(t, 5*time.Second, "the re-plan", func() bool { a, _ := h.st.Assignment(topicName, 0); return a.Target == otherNode })
	testwait.For(t, 5*time.Second, "the worker to end", func() bool { return h.r.Workers() == 0 })
	if exists(h.staging()) || exists(h.path()) {
		t.Fatalf("cancelled move left staging=%v path=%v", exists(h.staging()), exists(h.path()))
	}
	if h.st.completes.Load() != 0 {
		t.Fatal("a cancelled worker went on to flip")
	}
}

// MV-2, MV-22: the reply of a committed flip is lost; the leader read shows this node owns
// the partition, so the install stays and the move is done.
func TestLostReplyOfACommittedFlipKeepsTheInstall(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(80, 100)
	faults.SetNth(FaultFlipReply, 1, nil)
	h.start()
	h.waitFlipped(5 * time.Second)
	testwait.For(t, 5*time.Second, "the move to count as completed", func() bool { return h.counter(outcomeCompleted) == 1 })
	h.checkInstalled()
	if h.loc.renameBacks.Load() != 0 {
		t.Fatal("a committed flip's install was taken off the path")
	}
	if n := h.logs.count("move: flip outcome unknown; resolving with the leader"); n != 1 {
		t.Fatalf("want one unknown outcome, got %d", n)
	}
}

// MV-2: a retried flip of a partition that already flipped to this node is answered as
// done: the first proposal lands late, just before the re-proposal.
func TestRetriedFlipAnsweredAlreadyDoneCompletes(t *testing.T) {
	h := newHarness(t, 4096)
	h.src.MustProduce(30, 100)
	var results []meta.CASResult
	var mu sync.Mutex
	h.st.completeFn = func(n int64, apply casFn) (meta.CASResult, meta.Assignment, error) {
		if n == 1 {
			return 0, meta.Assignment{}, meta.ErrTimeout // in flight, not yet applied
		}
		if n == 2 {
			apply() // the first proposal reaches the leader's log first
		}
		res, a, err := apply()
		mu.Lock()
		results = append(results, res)
		mu.Unlock()
		return res, a, err
	}
	h.start()
	h.waitFlipped(5 * time.Second)
	testwait.For(t, 5*time.Second, "the move to count as completed", func() bool { return h.counter(outcomeCompleted) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 1 || results[0] != meta.CASAlreadyDone {
		t.Fatalf("re-proposal results %v, want [already_done]", results)
	}
	h.checkInstalled()
	if h.loc.renameBacks.Load() != 0 {
		t.Fatal("install taken off the path")
	}
}

// MV-23: a lost proposal that is no longer proposable (its freeze lapsed) is taken off the
// path only by a leader read started ≥ 15 s after it; the same worker then resumes from the
// staged copy, fetching only what it lacks.
func TestUnknownFlipIsTakenBackOnlyAfterTheDelayAndTheSessionResumes(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(100, 100)
	h.st.completeFn = func(n int64, apply casFn) (meta.CASResult, meta.Assignment, error) {
		if n == 1 {
			return 0, meta.Assignment{}, meta.ErrNoLeader // the proposal is lost
		}
		return apply()
	}
	h.src.onFence = func(s *fakeSource, n int64) {
		if n == 2 { // the fence before the re-proposal finds the freeze lapsed
			s.deadline = time.Now().Add(-time.Millisecond)
		}
	}
	h.start()
	testwait.For(t, 5*time.Second, "the refused re-proposal fence", func() bool { return h.src.fenceRefusals.Load() == 1 })
	h.src.MustProduce(3, 100) // the freeze lapsed: the source commits again
	base := h.st.confirms.Load()
	testwait.For(t, 5*time.Second, "leader reads before the delay", func() bool { return h.st.confirms.Load() >= base+5 })
	if h.loc.renameBacks.Load() != 0 || !exists(h.path()) {
		t.Fatal("a read started less than 15 s after the unknown proposal took the install off the path")
	}
	if rep, _ := h.report(); rep.Phase != "unconfirmed_flip" {
		t.Fatalf("phase %q, want unconfirmed_flip", rep.Phase)
	}
	fetchedBefore := h.src.fetchedBytes.Load()
	h.clock.Advance(15 * time.Second)
	h.waitFlipped(5 * time.Second)
	if h.loc.renameBacks.Load() != 1 || h.loc.installs.Load() != 2 {
		t.Fatalf("renameBacks=%d installs=%d, want 1 and 2", h.loc.renameBacks.Load(), h.loc.installs.Load())
	}
	h.checkInstalled()
	if refetched := h.src.fetchedBytes.Load() - fetchedBefore; refetched > 1024 {
		t.Fatalf("the resumed session fetched %d bytes; it must fetch only the new records", refetched)
	}
	if n := h.logs.count("move: started"); n != 1 {
		t.Fatalf("the same worker must resume: %d workers started", n)
	}
}

// MV-24: an unknown flip is re-proposed for at most 2 minutes from the first unknown
// proposal; then the worker stops proposing and lets that freeze lapse.
func TestUnknownFlipIsReproposedForAtMostTwoMinutes(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(20, 100)
	t0 := h.clock.Now()
	var lost atomic.Bool
	lost.Store(true)
	type call struct {
		at   time.Time
		arms int64
	}
	var mu sync.Mutex
	var calls []call
	h.st.completeFn = func(n int64, apply casFn) (meta.CASResult, meta.Assignment, error) {
		mu.Lock()
		calls = append(calls, call{at: h.clock.Now(), arms: h.src.arms.Load()})
		mu.Unlock()
		if lost.Load() {
			return 0, meta.Assignment{}, meta.ErrNoLeader // the leader keeps answering 503
		}
		return apply()
	}
	var firstToken atomic.Value
	var oldTokenAfterNewArm atomic.Int64
	h.src.onArm = func(s *fakeSource) {
		if s.arms.Load() == 2 {
			firstToken.Store(s.token)
		}
	}
	h.src.rearmSeen = func(token string, _ bool) {
		if v, ok := firstToken.Load().(string); ok && v == token {
			oldTokenAfterNewArm.Add(1)
		}
	}
	h.start()
	countCalls := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
	testwait.For(t, 5*time.Second, "re-proposals", func() bool { return countCalls() >= 3 })
	h.clock.Advance(61 * time.Second)
	n := countCalls()
	testwait.For(t, 5*time.Second, "re-proposals within the limit", func() bool { return countCalls() >= n+3 })
	h.clock.Advance(60 * time.Second) // past 2 minutes from the first unknown proposal
	testwait.For(t, 5*time.Second, "a fresh freeze after the limit", func() bool { return h.src.arms.Load() >= 2 })
	testwait.For(t, 5*time.Second, "a proposal under the fresh freeze", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls[len(calls)-1].arms >= 2
	})
	lost.Store(false)
	h.waitFlipped(5 * time.Second)
	mu.Lock()
	for _, c := range calls {
		if c.at.Sub(t0) >= 2*time.Minute && c.arms < 2 {
			t.Fatalf("proposed at +%v under the first freeze, past the 2-minute limit", c.at.Sub(t0))
		}
	}
	mu.Unlock()
	if firstToken.Load() == nil {
		t.Fatal("setup: no second freeze")
	}
	if oldTokenAfterNewArm.Load() != 0 {
		t.Fatal("the first freeze was still re-armed after the limit; it must lapse")
	}
	h.checkInstalled()
}

// MV-25: a leader read that cannot be confirmed (failed, or unmarked) never takes the install
// off the path, however long it lasts.
func TestUnconfirmedLeaderReadsLeaveTheInstallInPlace(t *testing.T) {
	h := newHarness(t, 4096)
	h.useClock()
	h.src.MustProduce(20, 100)
	h.st.completeFn = func(n int64, apply casFn) (meta.CASResult, meta.Assignment, error) {
		if n == 1 {
			return 0, meta.Assignment{}, meta.ErrNoLeader
		}
		return apply()
	}
	var unmarked atomic.Bool
	unmarked.Store(true)
	h.st.confirmErr = func(int64) error {
		if unmarked.Load() {
			return meta.ErrNoLeader // e.g. an answer not marked as a leader read
		}
		return nil
	}
	h.start()
	testwait.For(t, 5*time.Second, "leader reads", func() bool { return h.st.confirms.Load() >= 3 })
	h.clock.Advance(30 * time.Second)
	base := h.st.confirms.Load()
	testwait.For(t, 5*time.Second, "more leader reads", func() bool { return h.st.confirms.Load() >= base+5 })
	if h.loc.renameBacks.Load() != 0 || !exists(h.path()) {
		t.Fatal("an unconfirmed read took the install off the path")
	}
	if h.st.completes.Load() != 1 {
		t.Fatalf("re-proposed %d times without a confirmed read", h.st.completes.Load()-1)
	}
	unmarked.Store(false)
	h.waitFlipped(5 * time.Second)
	h.checkInstalled()
}
