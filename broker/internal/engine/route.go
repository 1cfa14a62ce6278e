package engine

import (
	"context"
	"sort"
	"sync"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Queue-probe tuning (docs/internals/consume-and-leases.md §1). A probe never waits on the owner; one
// that fails (a frozen or unreachable peer) benches that peer for probeBench so a consume on
// this node is not slowed by every poll against it; dead members are skipped outright.
const (
	probeTimeout = 1 * time.Second
	probeBench   = 2 * time.Second
)

// suspects remembers peers whose last probe failed, by member id → unix nanos benched until.
type suspects struct {
	mu    sync.Mutex
	until map[string]int64
}

func (s *suspects) benched(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until[id] > now.UnixNano()
}

func (s *suspects) set(id string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]int64{}
	}
	if until.IsZero() {
		delete(s.until, id)
		return
	}
	s.until[id] = until.UnixNano()
}

// remoteOwners lists the live remote members owning partitions of t, sorted by id.
func (e *Engine) remoteOwners(t meta.Topic) []owner {
	seen := map[string]bool{}
	var out []owner
	for _, a := range e.view.Assignments(t.Name) {
		if a.Partition >= t.Partitions || a.Owner == "" || a.Owner == e.cfg.NodeID || seen[a.Owner] {
			continue
		}
		seen[a.Owner] = true
		o := e.ownerOf(t.Name, a.Partition)
		if o.dead || o.addr == "" || e.probeSuspects.benched(o.id, time.Now()) {
			continue
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// probeRemote is one non-blocking queue probe of a remote owner's partitions of t (op 2 with
// local_only). Every failure, including 421, counts as empty; ok is false after one.
func (e *Engine) probeRemote(ctx context.Context, o owner, t meta.Topic, max, taken int) (msgs []service.Message, ok bool) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	msgs, err := e.peers.Consume(pctx, o.addr, t.Name, service.ConsumeRequest{Partition: -1, Offset: -1, Max: max, Taken: taken}, true)
	if err != nil {
		if ctx.Err() == nil {
			e.probeSuspects.set(o.id, time.Now().Add(probeBench))
			e.log.Debug("remote consume probe failed", "topic", t.Name, "peer", o.id, "err", err)
		}
		return nil, false
	}
	return msgs, true
}

// Ack implements api.Backend: entries are split by partition owner; local ones are applied
// here, each remote owner gets one AckBatch (op 31), concurrently; results stay in request
// order. An entry whose owner is dead or unreachable answers 503.
func (e *Engine) Ack(ctx context.Context, t meta.Topic, entries []service.AckEntry) []error {
	if len(entries) == 1 && e.ownerOf(t.Name, entries[0].Partition).local {
		return e.AckLocal(t, entries) // the single-message ack: no routing tables
	}
	return e.ackRouted(ctx, t, entries)
}

// ackRouted is Ack for entries that may have other owners. Its goroutines capture t, which
// therefore lives on the heap: kept out of Ack's single-entry path.
func (e *Engine) ackRouted(ctx context.Context, t meta.Topic, entries []service.AckEntry) []error {
	out := make([]error, len(entries))
	var local []int
	remote := map[string][]int{} // cluster addr → entry indexes
	for i, en := range entries {
		o := e.ownerOf(t.Name, en.Partition)
		switch {
		case o.local:
			local = append(local, i)
		case !o.known || o.dead || o.addr == "" || e.peers == nil:
			out[i] = errcode.ErrUnavailable
		default:
			remote[o.addr] = append(remote[o.addr], i)
		}
	}
	var wg sync.WaitGroup
	for addr, idx := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := make([]service.AckEntry, len(idx))
			for j, i := range idx {
				sub[j] = entries[i]
				sub[j].Epoch = e.addressedEpoch(t, sub[j].Partition)
			}
			actx, cancel := context.WithTimeout(ctx, peerCallTimeout)
			defer cancel()
			errs, err := e.peers.Ack(actx, addr, t.Name, sub)
			for j, i := range idx {
				switch {
				case err != nil:
					out[i] = errcode.ErrUnavailable
				case j < len(errs):
					out[i] = errs[j]
				default:
					out[i] = errcode.ErrUnavailable
				}
			}
		}()
	}
	if len(local) > 0 {
		sub := make([]service.AckEntry, len(local))
		for j, i := range local {
			sub[j] = entries[i]
		}
		for j, err := range e.AckLocal(t, sub) {
			out[local[j]] = err
		}
	}
	wg.Wait()
	return out
}
