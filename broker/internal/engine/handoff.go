package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"narad.dev/broker/internal/faults"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// ErrFrozen: the partition is frozen for a move's handoff (docs/internals/moves.md §3). A commit refused
// with it appended nothing; it also wraps errcode.ErrUnavailable (503), which the dispatcher and
// the fan-out cursors retry like any 503.
var ErrFrozen = errors.New("partition frozen for a move handoff")

// Fault points of the handoff freeze (faults.Check), so tests can interleave a commit with an
// arm (MV-6, MV-7) and crash tests can stop a source at these points.
const (
	// FaultHandoffBeforeLock fires in PrepareHandoff's arm after the lease drain, before the
	// produce lock is taken; an error there lifts the new freeze and fails the arm.
	FaultHandoffBeforeLock = "engine.handoff_before_lock"
	// FaultCommitAfterGate fires in CommitLocal after the first freeze gate, before the produce
	// lock; an error there fails the commit (503) with nothing appended.
	FaultCommitAfterGate = "engine.commit_after_gate"
)

// leaseDrainPoll paces the arm's wait for leases already out (docs/internals/moves.md §3.3).
const leaseDrainPoll = 10 * time.Millisecond

// freeze is the handoff freeze of one open partition (docs/internals/moves.md §3.1). All fields are
// guarded by the partition's shardMu.
//
// Invariant: while the freeze is active (not ended and now < deadline, on the monotonic
// clock) the partition appends nothing and its shard — whenever one exists — is frozen. A
// freeze is created only by an arm (a request without a token); a token can only move the
// deadline of the freeze it names.
type freeze struct {
	token    string
	armedAt  time.Time // start of the continuous frozen period (an arm over an active freeze keeps it)
	deadline time.Time // monotonic; the freeze lapses here unless re-armed
	timer    *time.Timer
	ended    bool // lifted: lapsed, disarmed, or the partition closed
}

// active reports whether f freezes its partition at now.
func (f *freeze) active(now time.Time) bool {
	return f != nil && !f.ended && now.Before(f.deadline)
}

// frozen reports whether pt's handoff freeze is active now (the commit gate, §5.1 step 3).
func (pt *partition) frozen() bool {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	return pt.frz.active(time.Now())
}

// PrepareHandoff arms, re-arms or fences the handoff freeze of (topic, p) on its owner (node
// RPC op 24, docs/internals/moves.md §3.3).
//
//   - Arm (no token): a new token replaces any earlier one; the deadline becomes now + ttl
//     (req.TTL, or transfer.FreezeTTL); new reservations stop; the call waits up to
//     min(transfer.LeaseDrainBound, ttl/4) for the leases already out to be acked or released,
//     then reads the transfer listing under the produce lock (so an in-flight commit is either
//     in it or refused) and returns it with Token and ExpiresInMs.
//   - Re-arm (token): the token must name the active freeze (else transfer.ErrUnknownToken, or
//     transfer.ErrFreezeLapsed when it named one that lapsed); the deadline becomes now + ttl.
//     The reply carries Token, HighWatermark and ExpiresInMs only.
//   - Fence (token + Fence): a re-arm that also requires the HWM to equal req.ExpectHWM
//     (transfer.ErrHWMMismatch otherwise, with the TTL not renewed).
//
// A token never creates a freeze. Errors (errcode's, which transfer's names alias): ErrNotOwner
// when this node does not own the partition; ErrTopicGone with ErrNotFound for an unknown
// topic or partition; the fence sentinels for the 409s; anything else wraps ErrUnavailable.
func (e *Engine) PrepareHandoff(ctx context.Context, topic string, p int, req transfer.PrepareRequest) (transfer.Listing, error) {
	t, err := e.transferTopic(topic, p)
	if err != nil {
		return transfer.Listing{}, err
	}
	ttl := req.TTL
	if ttl <= 0 {
		ttl = transfer.FreezeTTL
	}
	if req.Token != "" {
		return e.rearm(topic, p, t.Incarnation, req, ttl)
	}
	if err := ctx.Err(); err != nil {
		return transfer.Listing{}, unavailable(err)
	}
	pt, err := e.parts.get(t, p)
	if err != nil {
		return transfer.Listing{}, transferErr(err)
	}
	token, err := e.arm(pt, ttl)
	if err != nil {
		return transfer.Listing{}, err
	}
	l, err := e.armedListing(ctx, t, pt, token, ttl)
	if err != nil {
		e.disarm(pt, token)
		return transfer.Listing{}, err
	}
	return l, nil
}

// armedListing drains leases and reads the listing of a freshly armed freeze under the
// produce lock.
func (e *Engine) armedListing(ctx context.Context, t meta.Topic, pt *partition, token string, ttl time.Duration) (transfer.Listing, error) {
	e.drainLeases(ctx, pt, min(transfer.LeaseDrainBound, ttl/4))
	if err := ctx.Err(); err != nil { // nobody waits for this listing: lift the freeze
		return transfer.Listing{}, unavailable(err)
	}
	if err := faults.Check(FaultHandoffBeforeLock); err != nil {
		return transfer.Listing{}, unavailable(err)
	}
	pt.commitMu.Lock()
	defer pt.commitMu.Unlock()
	if !e.owns(t.Name, pt.key.p) {
		return transfer.Listing{}, notOwner(t.Name, pt.key.p)
	}
	if e.parts.peek(t.Name, pt.key.p) != pt {
		return transfer.Listing{}, unavailable(fmt.Errorf("%s/%d closed during the handoff", t.Name, pt.key.p))
	}
	pt.shardMu.Lock()
	f := pt.frz
	live := f.active(time.Now()) && f.token == token
	pt.shardMu.Unlock()
	if !live {
		// Lapsed during a drain longer than the TTL, or replaced by a concurrent arm.
		return transfer.Listing{}, unavailable(fmt.Errorf("%s/%d: freeze ended before the listing", t.Name, pt.key.p))
	}
	l, err := e.openListing(t, pt)
	if err != nil {
		return transfer.Listing{}, err
	}
	pt.shardMu.Lock()
	l.ExpiresInMs = max(0, time.Until(f.deadline).Milliseconds())
	pt.shardMu.Unlock()
	l.Token = token
	return l, nil
}

// arm starts (or takes over) pt's freeze under a new token and freezes its shard.
func (e *Engine) arm(pt *partition, ttl time.Duration) (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", unavailable(fmt.Errorf("freeze token: %w", err))
	}
	token := hex.EncodeToString(raw[:])
	now := time.Now()
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if pt.closed {
		return "", unavailable(fmt.Errorf("%s/%d closed", pt.key.topic, pt.key.p))
	}
	f := pt.frz
	if f.active(now) {
		f.token = token // the older token is now unknown; the frozen period continues
		f.deadline = now.Add(ttl)
	} else {
		if f != nil && !f.ended {
			e.endFreezeLocked(pt, "lapsed")
		}
		f = &freeze{token: token, armedAt: now, deadline: now.Add(ttl)}
		pt.frz = f
		f.timer = time.AfterFunc(ttl, e.freezeTimer(pt, f))
	}
	if pt.shard != nil {
		pt.shard.SetFrozen(true)
	}
	e.log.Info("handoff freeze armed", "topic", pt.key.topic, "partition", pt.key.p, "ttl", ttl,
		"hwm", pt.log.HighWatermark())
	return token, nil
}

// disarm lifts the freeze a failed arm created, unless a later arm took it over.
func (e *Engine) disarm(pt *partition, token string) {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if f := pt.frz; f != nil && !f.ended && f.token == token {
		e.endFreezeLocked(pt, "arm failed")
	}
}

// drainLeases waits up to bound for pt's shard to have no lease out (acked, nacked or
// expired), purging expired leases as it polls. A shard created meanwhile starts frozen and
// empty. It returns early when ctx ends; what is still out is redelivered by the new owner.
func (e *Engine) drainLeases(ctx context.Context, pt *partition, bound time.Duration) {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(leaseDrainPoll)
	defer tick.Stop()
	for {
		pt.shardMu.Lock()
		s := pt.shard
		pt.shardMu.Unlock()
		if s == nil {
			return
		}
		s.PurgeExpired()
		if s.State().InFlight == 0 || !time.Now().Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// rearm is the token path of PrepareHandoff: re-arm, or fence when req.Fence.
func (e *Engine) rearm(topic string, p int, incarnation string, req transfer.PrepareRequest, ttl time.Duration) (transfer.Listing, error) {
	pt := e.parts.peek(topic, p)
	if pt == nil || pt.incarnation != incarnation {
		// The freeze lived in a partition that has closed since (or never existed here).
		return transfer.Listing{}, fmt.Errorf("%s/%d: %w", topic, p, transfer.ErrUnknownToken)
	}
	if req.Fence {
		// Under the produce lock no commit is mid-flight, so the HWM compared is final.
		pt.commitMu.Lock()
		defer pt.commitMu.Unlock()
	}
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	f := pt.frz
	now := time.Now()
	switch {
	case f == nil || f.token != req.Token:
		return transfer.Listing{}, fmt.Errorf("%s/%d: %w", topic, p, transfer.ErrUnknownToken)
	case !f.active(now):
		return transfer.Listing{}, fmt.Errorf("%s/%d: %w", topic, p, transfer.ErrFreezeLapsed)
	}
	hwm := pt.log.HighWatermark()
	if req.Fence && hwm != req.ExpectHWM {
		return transfer.Listing{}, fmt.Errorf("%s/%d: hwm %d, expected %d: %w", topic, p, hwm, req.ExpectHWM, transfer.ErrHWMMismatch)
	}
	f.deadline = now.Add(ttl)
	return transfer.Listing{Token: req.Token, HighWatermark: hwm, Incarnation: incarnation,
		ExpiresInMs: ttl.Milliseconds()}, nil
}

// freezeTimer returns the lapse callback of f: it ends f at its deadline, rescheduling itself
// when a re-arm moved the deadline since it was set.
func (e *Engine) freezeTimer(pt *partition, f *freeze) func() {
	return func() {
		pt.shardMu.Lock()
		defer pt.shardMu.Unlock()
		if pt.frz != f || f.ended {
			return
		}
		if d := time.Until(f.deadline); d > 0 {
			f.timer = time.AfterFunc(d, e.freezeTimer(pt, f))
			return
		}
		e.endFreezeLocked(pt, "lapsed")
	}
}

// endFreezeLocked lifts pt's freeze: the shard reserves again, waiters (here and on peers)
// are woken, and the frozen period is observed in narad_moves_freeze_seconds. The ended
// freeze stays recorded so its token is answered freeze_lapsed. Caller holds pt.shardMu.
func (e *Engine) endFreezeLocked(pt *partition, why string) {
	f := pt.frz
	if f == nil || f.ended {
		return
	}
	f.ended = true
	if f.timer != nil {
		f.timer.Stop()
	}
	frozenFor := time.Since(f.armedAt)
	e.m.MovesFreeze.Observe(frozenFor.Seconds())
	if pt.shard != nil {
		pt.shard.SetFrozen(false) // broadcasts to local and remote waiters
	} else {
		taken := e.localTaker(pt.key.topic)
		pt.log.Broadcast()
		e.notifyPeers(pt.key.topic, pt.key.p, taken)
	}
	e.log.Info("handoff freeze ended", "topic", pt.key.topic, "partition", pt.key.p, "reason", why,
		"frozen_for", frozenFor)
}
