package partition

import (
	"fmt"
	"time"

	"narad.dev/broker/internal/errcode"
)

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

// Frozen reports whether pt's handoff freeze is active now (the commit gate, §5.1 step 3).
func (pt *Partition) Frozen() bool {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	return pt.frz.active(time.Now())
}

// ArmFreeze starts (or takes over) pt's freeze under token with the deadline now + ttl, and
// freezes its shard. An active freeze keeps its frozen period and answers only to the new
// token from now on. false: pt is closed and nothing was armed.
func (r *Registry) ArmFreeze(pt *Partition, token string, ttl time.Duration) bool {
	now := time.Now()
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if pt.closed {
		return false
	}
	f := pt.frz
	if f.active(now) {
		f.token = token // the older token is now unknown; the frozen period continues
		f.deadline = now.Add(ttl)
	} else {
		if f != nil && !f.ended {
			r.endFreezeLocked(pt, "lapsed")
		}
		f = &freeze{token: token, armedAt: now, deadline: now.Add(ttl)}
		pt.frz = f
		f.timer = time.AfterFunc(ttl, r.freezeTimer(pt, f))
	}
	if pt.shard != nil {
		pt.shard.SetFrozen(true)
	}
	return true
}

// EndFreeze lifts pt's freeze if it is not ended and token names it (a failed arm whose
// freeze no later arm took over).
func (r *Registry) EndFreeze(pt *Partition, token, why string) {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if f := pt.frz; f != nil && !f.ended && f.token == token {
		r.endFreezeLocked(pt, why)
	}
}

// LiveFreeze reports whether token names pt's active freeze; deadline reads that freeze's
// deadline (under pt's lock) whenever it is called.
func (pt *Partition) LiveFreeze(token string) (deadline func() time.Time, ok bool) {
	pt.shardMu.Lock()
	f := pt.frz
	live := f.active(time.Now()) && f.token == token
	pt.shardMu.Unlock()
	return func() time.Time {
		pt.shardMu.Lock()
		defer pt.shardMu.Unlock()
		return f.deadline
	}, live
}

// FreezeState is pt's latest freeze's deadline and whether it ended (zero, false: never
// armed).
func (pt *Partition) FreezeState() (deadline time.Time, ended bool) {
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	if pt.frz == nil {
		return time.Time{}, false
	}
	return pt.frz.deadline, pt.frz.ended
}

// RenewFreeze moves the deadline of the active freeze token names to now + ttl and returns
// the HWM. With fence it holds the produce lock, so the HWM is final, and renews only if the
// HWM equals expectHWM. Errors: errcode.ErrUnknownToken (token names no freeze of pt),
// errcode.ErrFreezeLapsed (it names one that lapsed), errcode.ErrHWMMismatch (the fence
// failed; the deadline is unchanged).
func (pt *Partition) RenewFreeze(token string, ttl time.Duration, fence bool, expectHWM int64) (int64, error) {
	if fence {
		// Under the produce lock no commit is mid-flight, so the HWM compared is final.
		pt.commitMu.Lock()
		defer pt.commitMu.Unlock()
	}
	pt.shardMu.Lock()
	defer pt.shardMu.Unlock()
	f := pt.frz
	now := time.Now()
	switch {
	case f == nil || f.token != token:
		return 0, errcode.ErrUnknownToken
	case !f.active(now):
		return 0, errcode.ErrFreezeLapsed
	}
	hwm := pt.log.HighWatermark()
	if fence && hwm != expectHWM {
		return 0, fmt.Errorf("hwm %d, expected %d: %w", hwm, expectHWM, errcode.ErrHWMMismatch)
	}
	f.deadline = now.Add(ttl)
	return hwm, nil
}

// freezeTimer returns the lapse callback of f: it ends f at its deadline, rescheduling itself
// when a re-arm moved the deadline since it was set.
func (r *Registry) freezeTimer(pt *Partition, f *freeze) func() {
	return func() {
		pt.shardMu.Lock()
		defer pt.shardMu.Unlock()
		if pt.frz != f || f.ended {
			return
		}
		if d := time.Until(f.deadline); d > 0 {
			f.timer = time.AfterFunc(d, r.freezeTimer(pt, f))
			return
		}
		r.endFreezeLocked(pt, "lapsed")
	}
}

// endFreezeLocked lifts pt's freeze: the shard reserves again, waiters (here and on peers)
// are woken, and the frozen period is observed in narad_moves_freeze_seconds. The ended
// freeze stays recorded so its token is answered freeze_lapsed. Caller holds pt.shardMu.
func (r *Registry) endFreezeLocked(pt *Partition, why string) {
	f := pt.frz
	if f == nil || f.ended {
		return
	}
	f.ended = true
	if f.timer != nil {
		f.timer.Stop()
	}
	frozenFor := time.Since(f.armedAt)
	r.d.Metrics.MovesFreeze.Observe(frozenFor.Seconds())
	if pt.shard != nil {
		pt.shard.SetFrozen(false) // broadcasts to local and remote waiters
	} else {
		taken := r.d.Taker(pt.key.topic)
		pt.log.Broadcast()
		r.d.Notify(pt.key.topic, pt.key.p, taken)
	}
	r.d.Logger.Info("handoff freeze ended", "topic", pt.key.topic, "partition", pt.key.p, "reason", why,
		"frozen_for", frozenFor)
}
