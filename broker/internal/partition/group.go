package partition

import (
	"errors"
	"fmt"
	"sync"

	"narad.dev/broker/internal/errcode"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/wal"
)

// maxGroupBytes bounds the payload bytes one group append takes from the queue; the batch of
// the caller that appends is always taken, whatever its size.
const maxGroupBytes = 4 << 20

// appendGroup joins the concurrent commits of one partition into one log append, so one
// fsync covers them all (group commit: docs/internals/replication.md §4 for a replicated
// partition, docs/internals/produce-path.md §8 for an unreplicated one, where the commit
// also publishes, so one hwm persist covers them too). Callers queue their batches; one of
// them, the appender, takes the produce lock, then takes the queue (the batches of its kind:
// under its leadership, or unreplicated; up to maxGroupBytes), appends them as one and tells
// each its offsets or the error; then it hands the role to the caller at the head of the
// queue, if any. While an append is on disk the next group gathers.
//
// Invariants: busy is true exactly while an appender is at work or has been chosen; a batch
// leaves the queue only into a group, and its woken channel is closed exactly once: when its
// outcome is set, or when it is chosen as the next appender (then it sets its own outcome).
type appendGroup struct {
	mu    sync.Mutex
	queue []*groupBatch
	busy  bool
}

// groupBatch is one Commit or CommitReplicated call's batch waiting in an appendGroup.
type groupBatch struct {
	ld    *replica.Leader // the leadership it commits under; nil for an unreplicated partition
	recs  []wal.Record
	t0    int64 // the commit time stamped before the produce lock
	bytes int
	woken chan struct{}
	lead  bool // set before woken is closed: this caller appends the next group

	// The outcome: the batch's offsets [first, end), or err (nothing of it appended, or a
	// failure of the append itself).
	first, end int64
	err        error
}

func newGroupBatch(ld *replica.Leader, recs []wal.Record, t0 int64) *groupBatch {
	b := &groupBatch{ld: ld, recs: recs, t0: t0, woken: make(chan struct{})}
	for i := range recs {
		b.bytes += len(recs[i].Payload) + len(recs[i].Key)
	}
	return b
}

// appendGrouped appends b to pt's log together with the batches of concurrent callers and
// returns once b's outcome is set.
func (r *Registry) appendGrouped(pt *Partition, b *groupBatch) {
	g := &pt.group
	g.mu.Lock()
	g.queue = append(g.queue, b)
	if g.busy {
		g.mu.Unlock()
		<-b.woken
		if !b.lead {
			return
		}
	} else {
		g.busy = true
		g.mu.Unlock()
	}
	// b is the appender and the queue's head. The group is taken under the produce lock, so
	// everything that queued while the previous append was on disk joins it.
	pt.commitMu.Lock()
	group := g.take(b)
	if b.ld == nil {
		r.commitUnreplicated(pt, group)
	} else {
		r.appendReplicated(pt, b.ld, group)
	}
	pt.commitMu.Unlock()
	for _, x := range group {
		if x != b {
			close(x.woken)
		}
	}
	g.handOff()
}

// take removes from the queue the batches to append with b, the head: those under b's
// leadership (or, for b unreplicated, the unreplicated ones), in queue order, up to
// maxGroupBytes. A batch of another kind waits for a group of its own.
func (g *appendGroup) take(b *groupBatch) []*groupBatch {
	g.mu.Lock()
	defer g.mu.Unlock()
	group := []*groupBatch{b}
	rest := g.queue[:0]
	bytes := b.bytes
	for _, x := range g.queue {
		switch {
		case x == b:
		case x.ld == b.ld && bytes+x.bytes <= maxGroupBytes:
			group = append(group, x)
			bytes += x.bytes
		default:
			rest = append(rest, x)
		}
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return group
}

// handOff makes the queue's head the next appender, or ends the appender's role.
func (g *appendGroup) handOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.busy = false
		return
	}
	next := g.queue[0]
	next.lead = true
	close(next.woken)
}

// appendReplicated is the group's locked part (caller holds pt.commitMu): the re-checks and
// the leadership's CanAppend, then one append of every batch of group (one write, one
// fsync), each batch given its offsets. A record too large for the log fails the append
// with nothing written; the batches are then appended one by one, so only the batch that
// holds it fails.
func (r *Registry) appendReplicated(pt *Partition, ld *replica.Leader, group []*groupBatch) {
	topic, p := pt.key.topic, pt.key.p
	if err := r.checkLeading(pt, ld); err != nil {
		for _, b := range group {
			b.err = err
		}
		return
	}
	r.appendEach(pt, group, false)
	if err := ld.Appended(); err != nil {
		r.d.Logger.Warn("advance hwm after append", "topic", topic, "partition", p, "err", err)
	}
}

// commitUnreplicated is the group's locked part for an unreplicated partition (caller holds
// pt.commitMu): the gate re-checked under the produce lock (ownership, registration, the
// handoff freeze: a refused group appends nothing), then one commit of every batch of
// group: one write, one segment fsync, one hwm persist, each batch given its offsets.
func (r *Registry) commitUnreplicated(pt *Partition, group []*groupBatch) {
	err := r.checkOwning(pt) // seed: gate re-checked under the lock, nothing appended on a hit
	if err == nil && pt.Frozen() {
		err = frozenErr(pt.key.topic, pt.key.p) // seed: a freeze armed since the fast gate refuses
	}
	if err != nil {
		for _, b := range group {
			b.err = err
		}
		return
	}
	r.appendEach(pt, group, true)
}

// appendEach appends the batches of group as one, at the latest of their commit times raised
// to the partition's floor (so commit times never decrease along it); publish commits them
// (visible at once) instead of appending them to the hidden tail. A record too large for the
// log fails the append with nothing written; the batches are then appended one by one, so
// only the batch that holds it fails. Caller holds pt.commitMu.
func (r *Registry) appendEach(pt *Partition, group []*groupBatch, publish bool) {
	t0 := group[0].t0
	for _, b := range group[1:] {
		t0 = max(t0, b.t0)
	}
	ts := r.d.RaiseFloor(pt.key.topic, pt.key.p, t0)
	err := r.appendBatches(pt, group, ts, publish)
	if errors.Is(err, plog.ErrRecordTooLarge) && len(group) > 1 {
		for i := range group {
			r.appendBatches(pt, group[i:i+1], ts, publish)
		}
	}
}

// checkLeading is the gate re-checked under the produce lock: still the owner, the log still
// registered, and the leadership able to take records (nothing is appended otherwise).
func (r *Registry) checkLeading(pt *Partition, ld *replica.Leader) error {
	if err := r.checkOwning(pt); err != nil {
		return err
	}
	if err := ld.CanAppend(); err != nil {
		return fmt.Errorf("%s/%d: %w", pt.key.topic, pt.key.p, err)
	}
	return nil
}

// checkOwning is the part of the gate every commit re-checks under the produce lock: this
// node still owns the partition, and pt is still its registered log.
func (r *Registry) checkOwning(pt *Partition) error {
	topic, p := pt.key.topic, pt.key.p
	if !r.d.Owns(topic, p) {
		return fmt.Errorf("%s/%d: %w", topic, p, errcode.ErrNotOwner)
	}
	if r.Peek(topic, p) != pt {
		return fmt.Errorf("%s/%d closed during commit: %w", topic, p, errcode.ErrUnavailable)
	}
	return nil
}

// appendBatches appends the records of batches as one log append (publish: one log commit)
// at commit time ts and sets each batch's outcome; it returns the log's error (nil on
// success). Caller holds pt.commitMu.
func (r *Registry) appendBatches(pt *Partition, batches []*groupBatch, ts int64, publish bool) error {
	topic, p := pt.key.topic, pt.key.p
	n := 0
	for _, b := range batches {
		n += len(b.recs)
	}
	entries := make([]plog.Entry, 0, n)
	var bytes int
	for _, b := range batches {
		for i := range b.recs {
			entries = append(entries, plog.Entry{Key: []byte(b.recs[i].Key), Payload: b.recs[i].Payload})
			bytes += len(b.recs[i].Payload)
		}
	}
	var first int64
	var err error
	if publish {
		first, err = pt.log.Commit(entries, ts)
	} else {
		first, _, err = pt.log.Append(entries, ts)
	}
	if err != nil {
		r.d.Metrics.Errors.WithLabelValues("messaging", "append").Inc()
		if errors.Is(err, plog.ErrFailed) || errors.Is(err, plog.ErrClosed) {
			go r.ClosePartition(pt)
		}
		werr := fmt.Errorf("commit %s/%d: %w: %v", topic, p, errcode.ErrUnavailable, err)
		for _, b := range batches {
			b.err = werr
		}
		return err
	}
	for _, b := range batches {
		b.first, b.end = first, first+int64(len(b.recs))
		first = b.end
	}
	c := pt.Series().Produced()
	c.Messages.Add(float64(len(entries)))
	c.Bytes.Add(float64(bytes))
	return nil
}
