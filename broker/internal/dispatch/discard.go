package dispatch

import (
	"context"
	"time"
)

// topicInc names one incarnation of a topic ("" = unknown).
type topicInc struct {
	topic, incarnation string
}

// discardConfirmed is the discard path (docs/internals/produce-path.md §7), the only way an accepted
// record dies undelivered. The caller has seen the topic absent (or another incarnation) in the
// local replica; discarding further needs the replica caught up AND the Raft leader confirming
// the absence. Anything less — not caught up, leader unreachable, leader says it exists — keeps
// the records, and the leader is not asked again for that topic before FailureBackoff.
func (d *Dispatcher) discardConfirmed(ctx context.Context, ti topicInc, now time.Time) bool {
	s := &d.scratch
	if v, ok := s.verdict[ti]; ok {
		return v
	}
	v := d.askLeader(ctx, ti, now)
	s.verdict[ti] = v
	if v {
		d.log.Warn("dispatch: discarding records of a deleted topic (leader confirmed)",
			"topic", ti.topic, "incarnation", ti.incarnation)
	}
	return v
}

func (d *Dispatcher) askLeader(ctx context.Context, ti topicInc, now time.Time) bool {
	s := &d.scratch
	if s.caughtUp == 0 {
		s.caughtUp = -1
		if d.topo.CaughtUp() {
			s.caughtUp = 1
		}
	}
	if s.caughtUp < 0 {
		return false
	}
	if t, ok := d.confirm[ti]; ok && now.Before(t) {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, d.opts.CommitTimeout)
	absent, err := d.topo.ConfirmAbsent(cctx, ti.topic, ti.incarnation)
	cancel()
	if err != nil || !absent {
		d.confirm[ti] = now.Add(d.opts.FailureBackoff)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("dispatch: cannot confirm a deleted topic with the leader; keeping its records",
				"topic", ti.topic, "incarnation", ti.incarnation, "err", err)
		}
		return false
	}
	delete(d.confirm, ti)
	return true
}
