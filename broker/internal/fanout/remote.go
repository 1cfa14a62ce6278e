package fanout

import (
	"context"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// RemoteObserver receives a remote link's metrics (labels parent, child = link id). An
// Observer that also implements it gets them; calls come from cursor goroutines concurrently.
type RemoteObserver interface {
	// RemoteLag sets narad_fanout_remote_lag_messages{parent,child,partition}.
	RemoteLag(parent, child string, partition int, msgs int64)
	// RemoteDueLag sets narad_fanout_remote_due_lag_seconds{parent,child,partition}: how long
	// the oldest unsent record has been due.
	RemoteDueLag(parent, child string, partition int, seconds float64)
	// RemoteSent adds to narad_fanout_remote_sent_bytes_total{parent,child}.
	RemoteSent(parent, child string, bytes int64)
	// RemoteSendError counts narad_fanout_remote_send_errors_total{parent,child,state}.
	RemoteSendError(parent, child, state string)
	// ForgetRemote deletes the cursor's RemoteLag and RemoteDueLag series.
	ForgetRemote(parent, child string, partition int)
}

// remoteState is the live state of a remote cursor, read by the children listing.
type remoteState struct {
	state    atomic.Pointer[string]
	lastErr  atomic.Pointer[string]
	failures int // consecutive failed slabs (cursor goroutine only)
}

func (r *remoteState) set(state, lastErr string) {
	r.state.Store(&state)
	if lastErr != "" {
		r.lastErr.Store(&lastErr)
	}
}

func (r *remoteState) get() (state, lastErr string) {
	if p := r.state.Load(); p != nil {
		state = *p
	}
	if p := r.lastErr.Load(); p != nil {
		lastErr = *p
	}
	return state, lastErr
}

// remoteObs returns the Observer's remote half, or nil.
func (c *cursor) remoteObs() RemoteObserver {
	ro, _ := c.obs.(RemoteObserver)
	return ro
}

// sendRemote hands the slab to the link's sender (docs/internals/fanout.md §13 rules 1–2). nil means the
// target answered 202 for every record and the cursor may advance.
func (c *cursor) sendRemote(ctx context.Context, s slab) error {
	if c.sender == nil { // a cursor run without a Runner (tests): a sender of its own
		c.sender = newLinkSender(c.cfg, *c.d.Remote)
	}
	sent, err := c.sender.Send(ctx, c.d.Partition, entriesOf(s.recs))
	ro := c.remoteObs()
	if ro != nil && sent > 0 {
		ro.RemoteSent(c.d.Parent, c.d.Child, sent)
	}
	if err == nil {
		// Active from the answer on, before the advance: a reader that sees the advanced
		// cursor file never sees the failure state of the slab that was just accepted.
		c.remote.failures = 0
		c.remote.set(RemoteActive, "")
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	state := StateOf(err)
	if state == "" {
		state = RemoteUnreachable
	}
	c.remote.set(state, err.Error())
	c.remote.failures++
	if ro != nil {
		ro.RemoteSendError(c.d.Parent, c.d.Child, state)
	}
	if c.remote.failures == 1 || c.remote.failures%30 == 0 {
		c.log.Warn("fanout remote send failing; the slab will be read again", "state", state,
			"offset", s.next-int64(len(s.recs)), "records", len(s.recs), "failures", c.remote.failures, "err", err)
	}
	return err
}

// newLinkSender is the Sender of one remote link under cfg.
func newLinkSender(cfg Config, t RemoteTarget) *Sender {
	s := NewSender(t, cfg.RemoteClient)
	s.Lanes, s.Quick = cfg.RemoteLanes, cfg.QuickBackoffs
	return s
}

// linkKey names a remote link under one epoch: its cursors on this node share one Sender.
type linkKey struct{ parent, id, epoch string }

// sharedSender is a link's Sender with the count of this node's cursors using it.
type sharedSender struct {
	s    *Sender
	refs int
}

// acquireSenderLocked returns the Sender of d's link, made on its first cursor. Caller holds
// r.mu; every acquire is paired with one releaseSender.
func (r *Runner) acquireSenderLocked(d Desired) *Sender {
	k := linkKey{d.Parent, d.Child, d.Epoch}
	sh := r.senders[k]
	if sh == nil {
		sh = &sharedSender{s: newLinkSender(r.cfg, *d.Remote)}
		r.senders[k] = sh
	}
	sh.refs++
	return sh.s
}

// releaseSender drops one cursor's use of d's link Sender; the last one closes it (its idle
// connections to the target go).
func (r *Runner) releaseSender(d Desired) {
	k := linkKey{d.Parent, d.Child, d.Epoch}
	r.mu.Lock()
	defer r.mu.Unlock()
	sh := r.senders[k]
	if sh == nil {
		return
	}
	if sh.refs--; sh.refs <= 0 {
		delete(r.senders, k)
		sh.s.Close()
	}
}

// remoteBackoff is the wait after the n-th consecutive failed slab: RetryBackoff doubled per
// failure, capped at RemoteBackoffCap, with full jitter over its upper half.
func remoteBackoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// reportRemote sets a remote cursor's lag series: the offset lag, and how long the oldest
// record of the slab has been due (0 for an empty slab).
func (c *cursor) reportRemote(s slab, pos int64) {
	ro := c.remoteObs()
	if ro == nil {
		return
	}
	var lag int64
	if c.plog != nil {
		lag = max(0, c.plog.HighWatermark()-pos)
	}
	ro.RemoteLag(c.d.Parent, c.d.Child, c.d.Partition, lag)
	due := 0.0
	if len(s.recs) > 0 {
		due = dueLag(c.cfg.Now(), s.recs[0].CommittedAt, c.d.DelayMs)
	}
	ro.RemoteDueLag(c.d.Parent, c.d.Child, c.d.Partition, due)
	c.dueLag.Store(math.Float64bits(due))
}

// forget deletes the cursor's series when it stops.
func (c *cursor) forget() {
	if c.d.Remote != nil {
		if ro := c.remoteObs(); ro != nil {
			ro.ForgetRemote(c.d.Parent, c.d.Child, c.d.Partition)
		}
		return
	}
	c.obs.Forget(c.d.Parent, c.d.Child, c.d.Partition)
}

// RemoteStatus reports the live state and last error of the remote cursor of (parent,
// partition, link id) on this node; ok is false when no such cursor runs.
func (r *Runner) RemoteStatus(parent string, partition int, id string) (state, lastErr string, ok bool) {
	c, found, _ := r.cursors.Get(slot{parent: parent, partition: partition, child: id})
	if !found || c.d.Remote == nil {
		return "", "", false
	}
	state, lastErr = c.remote.get()
	if state == "" {
		state = RemoteActive
	}
	return state, lastErr, true
}
