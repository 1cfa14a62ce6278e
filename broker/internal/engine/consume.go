package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// reprobeInterval bounds one park of a long-poll before the partitions are scanned again
// (docs/internals/consume-and-leases.md §1: remote owners are re-probed every 250 ms). A variable only so
// that tests can prove a wake-up came from a notice, not from the re-probe timer.
var reprobeInterval = 250 * time.Millisecond

func limitsOf(t meta.Topic) consume.Limits {
	vt := t.VisibilityTimeoutMs
	if vt <= 0 {
		vt = meta.DefaultVisibilityTimeoutMs
	}
	inflight, ahead := t.MaxInFlightPerPartition, t.MaxAckedAheadPerPartition
	if inflight <= 0 {
		inflight = meta.DefaultMaxInFlight
	}
	if ahead <= 0 {
		ahead = meta.DefaultMaxAckedAhead
	}
	return consume.Limits{VisibilityTimeout: time.Duration(vt) * time.Millisecond, MaxInFlight: int(inflight), MaxAckedAhead: int(ahead),
		MaxBytes: consume.DefaultMaxBytes}
}

// Consume implements api.Backend: replay, pinned queue and queue consumes, routed to the
// partition owners (docs/internals/consume-and-leases.md §1). With req.LocalOnly (the node-to-node plane)
// only this node's partitions are served and nothing is forwarded.
func (e *Engine) Consume(ctx context.Context, t meta.Topic, req service.ConsumeRequest) ([]service.Message, error) {
	if req.Max < 1 {
		req.Max = 1
	}
	if req.Offset >= 0 || req.Partition >= 0 {
		o := e.ownerOf(t.Name, req.Partition)
		switch {
		case o.local && req.Offset >= 0:
			return e.replay(ctx, t, req.Partition, req.Offset, req.Max, req.Taken)
		case o.local:
			return e.reserve(ctx, t, []int{req.Partition}, nil, req)
		case req.LocalOnly:
			return nil, fmt.Errorf("%s/%d: %w", t.Name, req.Partition, errcode.ErrNotOwner)
		case !o.known || o.dead || e.peers == nil:
			return nil, fmt.Errorf("partition %d: %w", req.Partition, errcode.ErrOwnerDown)
		}
		// The owner's answer is held here until it is written, so it counts on this node's
		// answer budget. The call may park at the owner for the whole wait, which must not hold
		// budget, so the budget only admits it (it must have room for the answer now) and
		// takes what the answer brings once it is here, past the limit if it must.
		grant, err := e.takeAnswer(ctx, req.Max, req.Taken)
		if err != nil {
			return nil, err
		}
		e.answers.settle(grant, 0)
		cctx, cancel := context.WithTimeout(ctx, req.Wait+pinnedRPCSlack)
		defer cancel()
		req.Epoch = e.addressedEpoch(t, req.Partition)
		msgs, err := e.peers.Consume(cctx, o.addr, t.Name, req, false)
		e.answers.settle(0, messageBytes(msgs))
		if err != nil {
			e.ReleaseAnswer(msgs)
			if errors.Is(err, errcode.ErrGone) || errors.Is(err, errcode.ErrNotFound) {
				return nil, err
			}
			return nil, fmt.Errorf("partition %d on %s: %w: %v", req.Partition, o.id, errcode.ErrOwnerDown, err)
		}
		return msgs, nil // the owner counted the deliveries
	}
	if req.LocalOnly || e.peers == nil {
		return e.reserve(ctx, t, e.ownedPartitions(t), nil, req)
	}
	return e.reserve(ctx, t, e.ownedPartitions(t), e.remoteOwners, req)
}

// replay reads up to max records from offset without touching queue state, into an answer
// that holds taken bytes already (a peer's), under a grant of the answer budget: at most
// consume.DefaultMaxBytes in all, the bound of a queue consume answer
// (docs/internals/consume-and-leases.md §4).
func (e *Engine) replay(ctx context.Context, t meta.Topic, p int, offset int64, max, taken int) ([]service.Message, error) {
	if !e.owns(t.Name, p) {
		return nil, fmt.Errorf("partition %d: %w", p, errcode.ErrOwnerDown)
	}
	pt, err := e.parts.Get(t, p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	if offset >= pt.Log().HighWatermark() {
		return nil, nil
	}
	grant, err := e.takeAnswer(ctx, max, taken)
	if err != nil {
		return nil, err
	}
	recs, err := pt.Log().ReadRange(offset, max, grant)
	held := 0
	for _, r := range recs {
		held += len(r.Key) + len(r.Payload)
	}
	e.answers.settle(grant, held)
	if len(recs) == 0 && err != nil {
		if errors.Is(err, plog.ErrOffsetOutOfRange) || errors.Is(err, plog.ErrCorruptRecord) {
			return nil, fmt.Errorf("offset %d: %w", offset, errcode.ErrGone)
		}
		if errors.Is(err, plog.ErrNotVisible) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
	out := make([]service.Message, len(recs))
	var bytes int
	for i, r := range recs {
		out[i] = service.Message{Topic: t.Name, Partition: p, Offset: r.Offset, Key: r.Key, Payload: r.Payload, CommittedAtMs: r.CommittedAt}
		bytes += len(r.Payload)
	}
	c := pt.Series().Consumed()
	c.Messages.Add(float64(len(out)))
	c.Bytes.Add(float64(bytes))
	return out, nil
}

// reserve scans the local partitions parts (rotating the start per call) and then, when
// remotes is set, probes each live remote owner once without waiting (rotating order; failures
// count as empty), reserving up to max messages. With nothing reservable it parks on the local
// partitions' notify channels and the topic's remote-notice token until a commit, lease expiry
// or nack (here or on an owner elsewhere) wakes it, the re-probe interval passes, or wait runs
// out.
//
// Remote probes cost a node RPC each, so after the first pass they run only when a peer's
// notice woke this waiter or the re-probe interval passed since the last probe: a local commit
// wakes every local waiter, and all but one of them would otherwise go on to ask every other
// node for nothing. A peer's notice wakes one waiter; a waiter that filled its batch from a
// remote owner passes the token on, so a burst drains without waiting for the interval.
//
// An answer holds at most consume.DefaultMaxBytes of keys and payloads (with req.Taken, those
// of the answer a probing node already holds), or one message alone: each shard and each
// probed owner is told how many the answer holds so far. Each message read here takes its
// bytes from the node's answer budget, and remote probes run under a grant of it; what the
// answer holds stays taken until the caller's ReleaseAnswer. Records found while the budget
// is spent refuse the call with errAnswersBusy (503) once the wait runs out.
func (e *Engine) reserve(ctx context.Context, t meta.Topic, parts []int, remotes func(meta.Topic) []owner, req service.ConsumeRequest) ([]service.Message, error) {
	lim := limitsOf(t)
	max, wait, taken := req.Max, req.Wait, req.Taken
	deadline := time.Now().Add(wait)
	start := int(e.roundRobin("\x00consume/" + t.Name).Add(1))
	chans := make([]<-chan struct{}, 0, len(parts)+1)
	var lastProbe time.Time // zero: the first pass probes
	woken := false          // the last park ended by a peer's notice
	// Local reads take the node's answer budget message by message (answers.go): a pass holds
	// what it found and nothing more, a parked long-poll nothing. A budget held by other
	// answers is waited for until the deadline, at least answerGrantWait.
	starved := false // the last pass found a record the budget could not take
	lim.Take = func(n int) bool {
		if e.answers.take(n) {
			return true
		}
		starved = true
		return false
	}
	busyUntil, pause := later(deadline, time.Now().Add(answerGrantWait)), minAnswerPause
	if remotes != nil && wait > 0 {
		// While this long-poll runs, a commit on a local partition is its to take: peers are
		// not told (see notifyPeers). Counted for the whole call, not just while parked, so
		// the commit that wakes it cannot race its decrement.
		active := e.parkedCounter(t.Name)
		active.Add(1)
		defer active.Add(-1)
	}
	for {
		chans = chans[:0]
		var token <-chan struct{}
		if remotes != nil {
			token = e.remote.token(t.Name)
			chans = append(chans, token) // index 0: the remote-notice token
		}
		starved = false
		out, bytes := e.reserveLocal(t, parts, start, lim, max, taken, &chans)
		if remotes != nil && len(out) < max && bytes < lim.MaxBytes && (woken || time.Since(lastProbe) >= reprobeInterval) {
			// A probe's answer comes into this node: the probes run under a grant, which the
			// owners are told as their room (what lies outside it counted as taken). With no
			// grant to be had they wait for a later pass.
			if grant := e.answers.grantShare(answerRoom(max-len(out), bytes)); grant > 0 {
				// A long-poll's first pass skips the owners found drained by a recent probe
				// (drained.go); it parks until the oldest such mark expires, then probes all.
				skip := lastProbe.IsZero() && wait >= reprobeInterval
				now := time.Now()
				lastProbe = now
				others := remotes(t)
				fromRemote, room := 0, grant
				for i := 0; i < len(others) && len(out) < max && room > 0; i++ {
					o := others[(start+i)%len(others)]
					notices := e.remote.notices(t.Name)
					if skip {
						if at, ok := e.drained.fresh(t.Name, o.id, notices, now, reprobeInterval); ok {
							lastProbe = minTime(lastProbe, at)
							continue
						}
					}
					got, ok := e.probeRemote(ctx, o, t, max-len(out), consume.DefaultMaxBytes-room)
					// Drained only if an empty answer could not be the grant's doing.
					e.drained.note(t.Name, o.id, ok && len(got) == 0 && len(out) == 0, now, notices, reprobeInterval)
					fromRemote += len(got)
					out = append(out, got...)
					n := messageBytes(got)
					bytes += n
					room -= n
				}
				e.answers.settle(grant, grant-room)
				if woken && fromRemote > 0 && len(out) >= max {
					e.remote.wakeOne(t.Name) // there may be more: pass the token on
				}
			}
		}
		if len(out) > 0 {
			return out, nil
		}
		if starved {
			// Records are there, but the budget is held by answers still being written: wait
			// for room rather than for records, then refuse.
			if ctx.Err() != nil {
				return nil, nil
			}
			if !time.Now().Before(busyUntil) {
				return nil, errAnswersBusy
			}
			time.Sleep(pause)
			pause = min(2*pause, maxAnswerPause)
			continue
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		d := min(remaining, reprobeInterval)
		if remotes != nil {
			d = min(remaining, atLeastMs(reprobeInterval-time.Since(lastProbe)))
		}
		if len(chans) == 0 {
			chans = append(chans, e.remote.token(t.Name)) // nothing to watch: sleep out d
		}
		fired := park(ctx, chans, d)
		if fired == parkCancelled {
			return nil, nil
		}
		woken = token != nil && fired == 0
		parts = e.refreshLocal(t, parts, remotes != nil)
	}
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// atLeastMs clamps d to at least a millisecond.
func atLeastMs(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d
}

// refreshLocal re-reads which partitions this node owns after a park (ownership may have
// moved); a pinned consume (routed=false with one partition) keeps its partition.
func (e *Engine) refreshLocal(t meta.Topic, parts []int, routed bool) []int {
	if !routed && len(parts) == 1 {
		return parts
	}
	return e.ownedPartitions(t)
}

// reserveLocal is one non-blocking pass over local partitions; it appends each probed
// partition's notify channel to chans (snapshotted before the probe).
// taken is the key and payload bytes the answer holds already; it returns the answer's with
// the messages added, and stops at lim.MaxBytes.
func (e *Engine) reserveLocal(t meta.Topic, parts []int, start int, lim consume.Limits, max, taken int, chans *[]<-chan struct{}) ([]service.Message, int) {
	var out []service.Message
	for i := range parts {
		if taken >= lim.MaxBytes {
			break
		}
		p := parts[(start+i)%len(parts)]
		pt, err := e.parts.Get(t, p)
		if err != nil {
			continue
		}
		*chans = append(*chans, pt.Log().NotifyC()) // snapshot before probing: no lost wake-up
		shard, err := e.parts.ShardOf(t, pt)
		if err != nil {
			e.log.Error("open consume shard", "topic", t.Name, "partition", p, "err", err)
			continue
		}
		ds, _ := shard.Reserve(lim, max-len(out), taken)
		if len(ds) == 0 {
			continue
		}
		var bytes int
		for _, d := range ds {
			out = append(out, service.Message{
				Topic: t.Name, Partition: p, Offset: d.Message.Offset, Key: d.Message.Key,
				Payload: d.Message.Payload, CommittedAtMs: d.Message.CommittedAt,
				ReceiptHandle: d.Handle.String(),
			})
			bytes += len(d.Message.Payload)
			taken += len(d.Message.Key) + len(d.Message.Payload)
		}
		c := pt.Series().Consumed()
		c.Messages.Add(float64(len(ds)))
		c.Bytes.Add(float64(bytes))
		if len(out) >= max {
			break
		}
	}
	return out, taken
}

// messageBytes is the key and payload bytes of msgs.
func messageBytes(msgs []service.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Key) + len(m.Payload)
	}
	return n
}

// park results other than the index of the channel that fired.
const (
	parkTimeout   = -1
	parkCancelled = -2
)

// park blocks until one of chans is closed or receives (its index), d passes (parkTimeout) or
// ctx ends (parkCancelled).
func park(ctx context.Context, chans []<-chan struct{}, d time.Duration) int {
	tm := time.NewTimer(d)
	defer tm.Stop()
	if len(chans) <= len(parkFixed{}) {
		// The common shape, without reflect.Select's allocations; unused slots stay nil, and
		// a nil channel never becomes ready.
		var c parkFixed
		copy(c[:], chans)
		select {
		case <-c[0]:
			return 0
		case <-c[1]:
			return 1
		case <-c[2]:
			return 2
		case <-c[3]:
			return 3
		case <-tm.C:
			return parkTimeout
		case <-ctx.Done():
			return parkCancelled
		}
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tm.C)})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	chosen, _, _ := reflect.Select(cases)
	switch chosen {
	case 0:
		return parkCancelled
	case 1:
		return parkTimeout
	}
	return chosen - 2
}

// parkFixed is the channel set park selects on without reflection: a long-poll on up to
// three local partitions plus the remote-notice token.
type parkFixed [4]<-chan struct{}

// AckLocal applies entries on this node's shards (the owner side of op 31); an entry for a
// partition this node does not own answers ErrNotOwner (421 on the node plane).
func (e *Engine) AckLocal(t meta.Topic, entries []service.AckEntry) []error {
	lim := limitsOf(t)
	if len(entries) == 1 {
		return []error{e.ackOne(t, entries[0], lim)}
	}
	out := make([]error, len(entries))
	// Apply in ascending (partition, offset) order: an ack of the frontier hole then collapses
	// the run before the acks above it are judged against the acked-ahead cap, so a batch never
	// gets 503s that its own earlier entries would have cleared. Results stay in request order.
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(entries[a].Partition, entries[b].Partition); c != 0 {
			return c
		}
		return cmp.Compare(entries[a].Offset, entries[b].Offset)
	})
	for _, i := range order {
		out[i] = e.ackOne(t, entries[i], lim)
	}
	return out
}

func (e *Engine) ackOne(t meta.Topic, en service.AckEntry, lim consume.Limits) error {
	if !e.owns(t.Name, en.Partition) {
		return fmt.Errorf("partition %d: %w: %w", en.Partition, errcode.ErrUnavailable, errcode.ErrNotOwner)
	}
	pt := e.parts.Peek(t.Name, en.Partition)
	if pt == nil || pt.Incarnation() != t.Incarnation {
		e.m.AckRejected.WithLabelValues("stale").Inc()
		return errcode.ErrStale // no shard: no live reservation can exist
	}
	s := pt.Shard()
	if s == nil {
		e.m.AckRejected.WithLabelValues("stale").Inc()
		return errcode.ErrStale
	}
	var err error
	switch en.Op {
	case service.OpAck:
		err = s.Ack(en.Offset, en.Nonce, lim)
	case service.OpExtend:
		err = s.Extend(en.Offset, en.Nonce, lim)
	case service.OpNack:
		err = s.Nack(en.Offset, en.Nonce)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, consume.ErrStale):
		return errcode.ErrStale
	case errors.Is(err, consume.ErrAckedAheadFull):
		return errcode.ErrAckedAheadFull
	default:
		return fmt.Errorf("%w: %v", errcode.ErrUnavailable, err)
	}
}
