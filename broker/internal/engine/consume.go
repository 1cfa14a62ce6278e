package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/consume"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
)

// reprobeInterval bounds one park of a long-poll before the partitions are scanned again
// (spec/produce-consume.md §6.7: remote owners are re-probed every 250 ms).
const reprobeInterval = 250 * time.Millisecond

// replayMaxBytes bounds the payload bytes of one replay-many answer.
const replayMaxBytes = 8 << 20

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
	return consume.Limits{VisibilityTimeout: time.Duration(vt) * time.Millisecond, MaxInFlight: int(inflight), MaxAckedAhead: int(ahead)}
}

// Consume implements api.Backend: replay, pinned queue and queue consumes.
func (e *Engine) Consume(ctx context.Context, t meta.Topic, req api.ConsumeRequest) ([]api.Message, error) {
	if req.Max < 1 {
		req.Max = 1
	}
	if req.Offset >= 0 {
		return e.replay(t, req.Partition, req.Offset, req.Max)
	}
	if req.Partition >= 0 {
		if !e.owns(t.Name, req.Partition) {
			return nil, fmt.Errorf("partition %d: %w", req.Partition, api.ErrOwnerDown)
		}
		return e.reserve(ctx, t, []int{req.Partition}, req.Max, req.Wait)
	}
	return e.reserve(ctx, t, e.ownedPartitions(t), req.Max, req.Wait)
}

// replay reads up to max records from offset without touching queue state.
func (e *Engine) replay(t meta.Topic, p int, offset int64, max int) ([]api.Message, error) {
	if !e.owns(t.Name, p) {
		return nil, fmt.Errorf("partition %d: %w", p, api.ErrOwnerDown)
	}
	pt, err := e.parts.get(t, p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	if offset >= pt.log.HighWatermark() {
		return nil, nil
	}
	recs, err := pt.log.ReadRange(offset, max, replayMaxBytes)
	if len(recs) == 0 && err != nil {
		if errors.Is(err, plog.ErrOffsetOutOfRange) || errors.Is(err, plog.ErrCorruptRecord) {
			return nil, fmt.Errorf("offset %d: %w", offset, api.ErrGone)
		}
		if errors.Is(err, plog.ErrNotVisible) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	out := make([]api.Message, len(recs))
	var bytes int
	for i, r := range recs {
		out[i] = api.Message{Topic: t.Name, Partition: p, Offset: r.Offset, Key: r.Key, Payload: r.Payload, CommittedAtMs: r.CommittedAt}
		bytes += len(r.Payload)
	}
	e.m.MessagesConsumed.WithLabelValues(pt.labels[0], pt.labels[1]).Add(float64(len(out)))
	e.m.BytesConsumed.WithLabelValues(pt.labels[0], pt.labels[1]).Add(float64(bytes))
	return out, nil
}

// reserve scans parts (rotating the start per call) and reserves up to max messages; with
// nothing reservable it parks on the partitions' notify channels until a commit, lease expiry
// or nack wakes it, the re-probe interval passes, or wait runs out.
func (e *Engine) reserve(ctx context.Context, t meta.Topic, parts []int, max int, wait time.Duration) ([]api.Message, error) {
	if len(parts) == 0 {
		if wait > 0 {
			tm := time.NewTimer(wait)
			defer tm.Stop()
			select {
			case <-ctx.Done():
			case <-tm.C:
			}
		}
		return nil, nil
	}
	lim := limitsOf(t)
	deadline := time.Now().Add(wait)
	start := int(e.roundRobin("\x00consume/" + t.Name).Add(1))
	chans := make([]<-chan struct{}, 0, len(parts))
	for {
		chans = chans[:0]
		var out []api.Message
		for i := range parts {
			p := parts[(start+i)%len(parts)]
			pt, err := e.parts.get(t, p)
			if err != nil {
				continue
			}
			chans = append(chans, pt.log.NotifyC()) // snapshot before probing: no lost wake-up
			shard, err := e.parts.shardOf(t, pt)
			if err != nil {
				e.log.Error("open consume shard", "topic", t.Name, "partition", p, "err", err)
				continue
			}
			ds, _ := shard.Reserve(lim, max-len(out))
			if len(ds) == 0 {
				continue
			}
			var bytes int
			for _, d := range ds {
				out = append(out, api.Message{
					Topic: t.Name, Partition: p, Offset: d.Message.Offset, Key: d.Message.Key,
					Payload: d.Message.Payload, CommittedAtMs: d.Message.CommittedAt,
					ReceiptHandle: d.Handle.String(),
				})
				bytes += len(d.Message.Payload)
			}
			e.m.MessagesConsumed.WithLabelValues(pt.labels[0], pt.labels[1]).Add(float64(len(ds)))
			e.m.BytesConsumed.WithLabelValues(pt.labels[0], pt.labels[1]).Add(float64(bytes))
			if len(out) >= max {
				break
			}
		}
		if len(out) > 0 {
			return out, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		if !park(ctx, chans, min(remaining, reprobeInterval)) {
			return nil, nil
		}
	}
}

// park blocks until one of chans is closed, d passes (true) or ctx ends (false).
func park(ctx context.Context, chans []<-chan struct{}, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
		case <-tm.C:
		case <-ctx.Done():
			return false
		}
		return true
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tm.C)})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen != 0
}

// Ack implements api.Backend: each entry is applied on its partition's shard independently.
func (e *Engine) Ack(ctx context.Context, t meta.Topic, entries []api.AckEntry) []error {
	lim := limitsOf(t)
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

func (e *Engine) ackOne(t meta.Topic, en api.AckEntry, lim consume.Limits) error {
	if !e.owns(t.Name, en.Partition) {
		return fmt.Errorf("partition %d: %w", en.Partition, api.ErrUnavailable)
	}
	pt := e.parts.peek(t.Name, en.Partition)
	if pt == nil || pt.incarnation != t.Incarnation {
		e.m.AckRejected.WithLabelValues("stale").Inc()
		return api.ErrStale // no shard: no live reservation can exist
	}
	pt.shardMu.Lock()
	s := pt.shard
	pt.shardMu.Unlock()
	if s == nil {
		e.m.AckRejected.WithLabelValues("stale").Inc()
		return api.ErrStale
	}
	var err error
	switch en.Op {
	case api.OpAck:
		err = s.Ack(en.Offset, en.Nonce, lim)
	case api.OpExtend:
		err = s.Extend(en.Offset, en.Nonce, lim)
	case api.OpNack:
		err = s.Nack(en.Offset, en.Nonce)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, consume.ErrStale):
		return api.ErrStale
	case errors.Is(err, consume.ErrAckedAheadFull):
		return api.ErrAckedAheadFull
	default:
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
}
