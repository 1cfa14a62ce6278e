package dispatch

import (
	"time"
)

// deadForget: a dead owner not seen for this long is forgotten (and logged again if seen).
const deadForget = time.Minute

// partKey names one partition of a topic.
type partKey struct {
	topic     string
	partition int
}

// stuckState is a destination in a failure streak (docs/internals/produce-path.md §6). It is cleared
// by one successful commit to that partition.
type stuckState struct {
	firstFailedAt time.Time // start of the streak; the reroute grace runs from here
	lastFailedAt  time.Time
	retryAt       time.Time // no retry before this (FailureBackoff after the last failure)
	rerouteLogged bool
	seen          bool // some bucket targeted the partition in the current pass
}

// markFailed starts or extends the failure streak of k.
func (d *Dispatcher) markFailed(k partKey, dest Destination, now time.Time, err error) {
	st := d.stuck[k]
	if st == nil {
		st = &stuckState{firstFailedAt: now}
		d.stuck[k] = st
		d.log.Warn("dispatch: commit failed; destination stuck", "topic", k.topic, "partition", k.partition,
			"node", dest.Node, "err", err)
	}
	st.lastFailedAt = now
	st.retryAt = now.Add(d.opts.FailureBackoff)
}

// markSucceeded ends k's failure streak, if any.
func (d *Dispatcher) markSucceeded(k partKey, dest Destination, now time.Time) {
	if st := d.stuck[k]; st != nil {
		d.log.Info("dispatch: destination recovered", "topic", k.topic, "partition", k.partition,
			"node", dest.Node, "stuck_for", now.Sub(st.firstFailedAt))
		delete(d.stuck, k)
	}
}

// prune forgets per-partition state nobody needs any more: failure streaks that no bucket
// targeted in this pass once the grace has passed since their last failure (so a partition that
// failed only as a reroute target becomes eligible again), expired discard-confirmation
// backoffs, and dead owners not seen for deadForget.
func (d *Dispatcher) prune(now time.Time) {
	for k, st := range d.stuck {
		if !st.seen && now.Sub(st.lastFailedAt) >= d.opts.RerouteGrace {
			delete(d.stuck, k)
		}
		st.seen = false
	}
	for k, t := range d.confirm {
		if !now.Before(t) {
			delete(d.confirm, k)
		}
	}
	for k, t := range d.dead {
		if now.Sub(t) >= deadForget {
			delete(d.dead, k)
		}
	}
}

// sibling walks p+1, p+2, … mod n and returns the first partition whose owner is not dead and
// which is not itself stuck.
func (d *Dispatcher) sibling(topic string, p, n int) (int, Destination, bool) {
	for i := 1; i < n; i++ {
		q := (p + i) % n
		if _, stuck := d.stuck[partKey{topic, q}]; stuck {
			continue
		}
		dest := d.topo.Destination(topic, q)
		if dest.Kind == DestDeadOwner {
			continue
		}
		return q, dest, true
	}
	return 0, Destination{}, false
}
