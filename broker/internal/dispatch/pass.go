package dispatch

import (
	"context"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/wal"
)

// srcKey identifies a source bucket: records of one topic incarnation bound for one partition.
type srcKey struct {
	topic, incarnation string
	partition          uint32
}

type action uint8

const (
	actWait    action = iota // keep for a later pass
	actCommit                // commit into groups[group]
	actDiscard               // leader-confirmed deleted topic
)

// source is one bucket of the current pass and what the pass does with it.
type source struct {
	key      srcKey
	act      action
	group    int
	rerouted bool
}

// Commit states of a group within its pass.
const (
	groupPending  int32 = iota // not started (the pass stopped waiting first)
	groupRunning               // Commit in flight
	groupDone                  // finished within the pass; err says how
	groupDetached              // still running when the pass stopped waiting: owned by its goroutine
)

// group is one Commit call: records bound for one target partition, in WAL order.
type group struct {
	key      partKey
	dest     Destination
	recs     []wal.Record
	seqs     []uint64
	rerouted int // records whose own partition was another one
	err      error
	state    atomic.Int32
	started  time.Time
}

// passScratch is per-pass working memory, reused so that a steady-state pass allocates little.
type passScratch struct {
	entries  []wal.Entry
	entrySrc []int32
	srcIdx   map[srcKey]int32
	srcs     []source
	groupIdx map[partKey]int
	groups   []*group // groups[:ngroups] are in use
	ngroups  int
	verdict  map[topicInc]bool // discard decisions of this pass
	caughtUp int8              // 0 unknown, 1 yes, -1 no (asked at most once per pass)
}

func newPassScratch() passScratch {
	return passScratch{
		srcIdx: map[srcKey]int32{}, groupIdx: map[partKey]int{}, verdict: map[topicInc]bool{},
	}
}

func (s *passScratch) reset() {
	clear(s.entries) // drop references to payloads the WAL may free
	s.entries = s.entries[:0]
	s.entrySrc = s.entrySrc[:0]
	clear(s.srcIdx)
	s.srcs = s.srcs[:0]
	clear(s.groupIdx)
	for _, g := range s.groups[:s.ngroups] {
		clear(g.recs)
		g.recs, g.seqs, g.rerouted, g.err = g.recs[:0], g.seqs[:0], 0, nil
		g.state.Store(groupPending)
	}
	s.ngroups = 0
	clear(s.verdict)
	s.caughtUp = 0
}

// pass runs one dispatcher pass and reports whether another should follow at once (it made
// progress and more records are waiting beyond what it scanned).
func (d *Dispatcher) pass(ctx context.Context) bool {
	start := time.Now()
	s := &d.scratch
	s.reset()
	defer s.reset()
	cp := d.ahead.base
	d.partial = false
	next := d.w.NextSeq()
	d.passNext = next
	horizon := min(next, cp+uint64(d.window)*Lookahead)
	scanEnd, err := d.scan(cp, horizon)
	if err != nil {
		d.logError(&d.readErrAt, "dispatch: reading the WAL failed", "offset", scanEnd, "err", err)
		return false
	}
	if len(s.entries) == 0 {
		d.settleLate(d.opts.Now())
		d.observe(PassStats{Window: d.window, Checkpoint: cp, Undispatched: d.publish(cp, d.ahead.count),
			Duration: time.Since(start)})
		return false
	}
	d.partial = len(s.entries) < d.window
	st := PassStats{Window: d.window, Scanned: len(s.entries)}
	st.Committed += d.settleLate(d.opts.Now())
	d.bucket()
	d.resolve(ctx, d.opts.Now())
	st.Discarded = d.fillGroups()
	d.commitGroups(ctx)
	now := d.opts.Now()
	for i, g := range s.groups[:s.ngroups] {
		switch g.state.Load() {
		case groupPending:
			continue // never started: its records wait for the next pass
		case groupDetached:
			// Its goroutine owns g now; the pass gets a fresh group in its slot.
			d.hung[g.key] = g.started
			s.groups[i] = &group{}
			continue
		}
		switch {
		case g.err == nil:
			for _, seq := range g.seqs {
				d.ahead.add(seq)
			}
			st.Committed += len(g.seqs)
			st.Rerouted += g.rerouted
			d.markSucceeded(g.key, g.dest, now)
		case ctx.Err() == nil: // a failure caused by our own shutdown says nothing about the owner
			d.markFailed(g.key, g.dest, now, g.err)
		}
	}
	st.Waiting = st.Scanned - st.Committed - st.Discarded

	// seed: checkpoint only after verified commit — it moves to the lowest unfinished seq. The
	// next pass scans from it at once; the advancer makes it durable and compacts behind it.
	if newCP := d.ahead.firstUnset(); newCP > cp {
		d.ahead.advanceTo(newCP)
		d.adv.request(newCP)
	}
	d.prune(now)
	d.window = min(max(WindowPerPartition*len(s.srcs), MinWindow), MaxWindow)

	st.Checkpoint = d.ahead.base
	st.Undispatched = d.publish(d.ahead.base, d.ahead.count)
	st.Duration = time.Since(start)
	d.observe(st)
	return st.Committed+st.Discarded > 0 && d.w.NextSeq() > scanEnd
}

// logError logs at most once per errorLogInterval for the condition whose last log time is *at.
func (d *Dispatcher) logError(at *time.Time, msg string, args ...any) {
	if now := time.Now(); now.Sub(*at) >= errorLogInterval {
		*at = now
		d.log.Error(msg, args...)
	}
}

func (d *Dispatcher) observe(st PassStats) {
	if o := d.opts.Observer; o != nil {
		o.ObservePass(st)
	}
}

// scan reads unfinished records from cp up to horizon, skipping committedAhead, stopping after
// window records. It returns the first seq it did not examine.
func (d *Dispatcher) scan(cp, horizon uint64) (uint64, error) {
	s := &d.scratch
	pos := cp
	for pos < horizon && len(s.entries) < d.window {
		if d.ahead.has(pos) {
			pos = d.ahead.nextNonMember(pos, horizon)
			continue
		}
		end := d.ahead.nextMember(pos, horizon)
		n := int(min(end-pos, uint64(d.window-len(s.entries))))
		before := len(s.entries)
		var err error
		s.entries, err = d.w.ReadInto(s.entries, pos, n)
		if err != nil {
			return pos, err
		}
		pos += uint64(len(s.entries) - before)
		if len(s.entries)-before < n {
			break // reached the WAL's end
		}
	}
	return pos, nil
}

// bucket assigns every scanned entry to its source bucket, in WAL order.
func (d *Dispatcher) bucket() {
	s := &d.scratch
	last, lastIdx := srcKey{}, int32(-1)
	for i := range s.entries {
		r := &s.entries[i].Record
		k := srcKey{topic: r.Topic, incarnation: r.Incarnation, partition: r.Partition}
		if lastIdx < 0 || k != last {
			idx, ok := s.srcIdx[k]
			if !ok {
				idx = int32(len(s.srcs))
				s.srcs = append(s.srcs, source{key: k})
				s.srcIdx[k] = idx
			}
			last, lastIdx = k, idx
		}
		s.entrySrc = append(s.entrySrc, lastIdx)
	}
}

// resolve decides each source bucket's fate (docs/internals/produce-path.md §5, §6).
func (d *Dispatcher) resolve(ctx context.Context, now time.Time) {
	s := &d.scratch
	for i := range s.srcs {
		src := &s.srcs[i]
		topic := src.key.topic
		n, ok := d.topo.Partitions(topic, src.key.incarnation)
		if !ok {
			if d.discardConfirmed(ctx, topicInc{topic, src.key.incarnation}, now) {
				src.act = actDiscard
			}
			continue
		}
		if n <= 0 {
			continue // a topic without partitions cannot take records yet: wait
		}
		p := int(src.key.partition % uint32(n)) // counts only grow; never index past n
		k := partKey{topic, p}
		dest := d.topo.Destination(topic, p)
		if dest.Kind == DestDeadOwner { // dead-owner skip: reroute at once, no grace
			if _, logged := d.dead[k]; !logged {
				d.log.Warn("dispatch: partition owner dead; rerouting to a sibling", "topic", topic,
					"partition", p, "node", dest.Node)
			}
			d.dead[k] = now
			d.reroute(src, topic, p, n)
			continue
		}
		delete(d.dead, k)
		if since, hung := d.hung[k]; hung {
			// A commit to k is still in flight: never send a second one; after the grace, send
			// what queues behind it to a sibling (a late success then duplicates those, within
			// at-least-once).
			if now.Sub(since) >= d.opts.RerouteGrace {
				d.reroute(src, topic, p, n)
			}
			continue
		}
		st := d.stuck[k]
		if st != nil {
			st.seen = true
		}
		switch {
		case st == nil || !now.Before(st.retryAt): // healthy, or the retry that probes recovery
			src.act, src.group = actCommit, d.groupFor(k, dest)
		case now.Sub(st.firstFailedAt) >= d.opts.RerouteGrace:
			if !st.rerouteLogged {
				st.rerouteLogged = true
				d.log.Warn("dispatch: destination failing past the reroute grace; rerouting to a sibling",
					"topic", topic, "partition", p, "node", dest.Node, "failing_for", now.Sub(st.firstFailedAt))
			}
			d.reroute(src, topic, p, n)
		default: // within the grace: wait for our own partition
		}
	}
}

// reroute sends src to a live, non-stuck sibling of partition p, or leaves it waiting.
func (d *Dispatcher) reroute(src *source, topic string, p, n int) {
	if q, dest, ok := d.sibling(topic, p, n); ok {
		src.act, src.group, src.rerouted = actCommit, d.groupFor(partKey{topic, q}, dest), true
	}
}

// groupFor returns the index of the commit group for target k, creating it if needed.
func (d *Dispatcher) groupFor(k partKey, dest Destination) int {
	s := &d.scratch
	if i, ok := s.groupIdx[k]; ok {
		return i
	}
	if s.ngroups == len(s.groups) {
		s.groups = append(s.groups, &group{})
	}
	i := s.ngroups
	s.ngroups++
	g := s.groups[i]
	g.key, g.dest = k, dest
	s.groupIdx[k] = i
	return i
}

// fillGroups distributes the scanned entries, in WAL order, into their commit groups and
// finishes discarded ones. It returns the number discarded.
func (d *Dispatcher) fillGroups() int {
	s := &d.scratch
	discarded := 0
	for i := range s.entries {
		e := &s.entries[i]
		src := &s.srcs[s.entrySrc[i]]
		switch src.act {
		case actCommit:
			g := s.groups[src.group]
			g.recs = append(g.recs, e.Record)
			g.seqs = append(g.seqs, e.Seq)
			if src.rerouted {
				g.rerouted++
			}
		case actDiscard:
			d.ahead.add(e.Seq)
			discarded++
			if o := d.opts.Observer; o != nil {
				o.ObserveDiscard(e.Record.Topic)
			}
		}
	}
	return discarded
}

// commitGroups runs every group's Commit, at most CommitFanout at once, and waits for all of
// them, but no longer than PassWait: a group still running then is detached (its goroutine
// finishes it and queues it for settleLate) and one not yet started stays pending.
func (d *Dispatcher) commitGroups(ctx context.Context) {
	groups := append([]*group(nil), d.scratch.groups[:d.scratch.ngroups]...)
	if len(groups) == 0 {
		return
	}
	workers := min(d.opts.CommitFanout, len(groups))
	var next atomic.Int64
	var stop atomic.Bool
	finished := make(chan struct{}, len(groups))
	for range workers {
		d.detached.Add(1)
		go func() {
			defer d.detached.Done()
			for !stop.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(groups) {
					return
				}
				g := groups[i]
				g.started = d.opts.Now()
				g.state.Store(groupRunning)
				d.commitOne(ctx, g)
				if !g.state.CompareAndSwap(groupRunning, groupDone) {
					d.lateMu.Lock() // detached: the next pass accounts for it
					d.late = append(d.late, g)
					d.lateMu.Unlock()
				}
				finished <- struct{}{}
			}
		}()
	}
	timer := time.NewTimer(d.opts.PassWait)
	defer timer.Stop()
	for range groups {
		select {
		case <-finished:
			continue
		case <-timer.C:
		}
		stop.Store(true)
		for _, g := range groups {
			g.state.CompareAndSwap(groupRunning, groupDetached)
		}
		return
	}
}

// settleLate accounts for detached commits that have finished since the last pass: a success
// finishes their seqs (unless the checkpoint already moved past them because a sibling took the
// records); a failure starts the destination's failure streak at the commit's start. It returns
// the number of records it finished.
func (d *Dispatcher) settleLate(now time.Time) int {
	d.lateMu.Lock()
	late := d.late
	d.late = nil
	d.lateMu.Unlock()
	done := 0
	for _, g := range late {
		if since, ok := d.hung[g.key]; ok && !since.After(g.started) {
			delete(d.hung, g.key)
		}
		if g.err != nil {
			d.markFailed(g.key, g.dest, g.started, g.err)
			if st := d.stuck[g.key]; st != nil {
				st.lastFailedAt, st.retryAt = now, now.Add(d.opts.FailureBackoff)
			}
			continue
		}
		for _, seq := range g.seqs {
			if seq >= d.ahead.base && !d.ahead.has(seq) {
				d.ahead.add(seq)
				done++
			}
		}
		d.markSucceeded(g.key, g.dest, now)
	}
	return done
}

func (d *Dispatcher) commitOne(ctx context.Context, g *group) {
	cctx, cancel := context.WithTimeout(ctx, d.opts.CommitTimeout)
	defer cancel()
	g.err = d.c.Commit(cctx, g.dest, g.key.topic, g.key.partition, g.recs)
}
