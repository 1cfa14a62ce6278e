package engine

import (
	"context"
	"sync"
	"sync/atomic"
)

// noticeHub fans "new messages may be reservable on (topic, partition)" out to the node RPC
// WatchCommits streams of peers (op 33), so a long-poll parked on another node wakes within
// milliseconds of a commit, lease expiry or nack here. Notices are coalesced per subscriber:
// a slow stream sees each dirty partition once, however many commits happened meanwhile.
type noticeHub struct {
	count atomic.Int32 // subscribers; Mark is one atomic load when there are none
	mu    sync.Mutex
	subs  map[*NoticeSub]struct{}
}

// NoticeSub is one subscriber of the hub (one WatchCommits stream).
type NoticeSub struct {
	hub   *noticeHub
	mu    sync.Mutex
	dirty map[partKey]struct{}
	wake  chan struct{} // capacity 1: "dirty is not empty"
}

// PartitionRef names one partition of a notice.
type PartitionRef struct {
	Topic     string
	Partition int
}

func (h *noticeHub) mark(topic string, p int) {
	if h.count.Load() == 0 {
		return
	}
	k := partKey{topic, p}
	h.mu.Lock()
	for s := range h.subs {
		s.mu.Lock()
		s.dirty[k] = struct{}{}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
}

// localTaker reports whether a queue long-poll of topic is running on this node: it is woken
// by a commit or release here and takes the message locally, so peers need not be told
// (waking a consumer on another node as well would only cost that node a probe RPC that finds
// nothing). Callers read it before they wake local waiters: the waiter may otherwise take the
// message and return before the caller decides.
func (e *Engine) localTaker(topic string) bool {
	c, ok := e.parked.Load(topic)
	return ok && c.(*atomic.Int32).Load() > 0
}

// notifyPeers tells peers' parked long-polls that (topic, p) may have reservable messages,
// unless localTaker was true before the local wake-up (taken).
func (e *Engine) notifyPeers(topic string, p int, taken bool) {
	if taken || e.notices.count.Load() == 0 {
		return
	}
	e.notices.mark(topic, p)
}

// parkedCounter returns the count of queue long-polls of topic parked on this node.
func (e *Engine) parkedCounter(topic string) *atomic.Int32 {
	if c, ok := e.parked.Load(topic); ok {
		return c.(*atomic.Int32)
	}
	c, _ := e.parked.LoadOrStore(topic, new(atomic.Int32))
	return c.(*atomic.Int32)
}

// SubscribeNotices registers a WatchCommits stream; Close it when the stream ends.
func (e *Engine) SubscribeNotices() *NoticeSub {
	h := &e.notices
	s := &NoticeSub{hub: h, dirty: map[partKey]struct{}{}, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*NoticeSub]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.count.Add(1)
	h.mu.Unlock()
	return s
}

// Next blocks until at least one partition is dirty or ctx ends (nil). It returns and clears
// the dirty set.
func (s *NoticeSub) Next(ctx context.Context) []PartitionRef {
	select {
	case <-ctx.Done():
		return nil
	case <-s.wake:
	}
	s.mu.Lock()
	out := make([]PartitionRef, 0, len(s.dirty))
	for k := range s.dirty {
		out = append(out, PartitionRef{Topic: k.topic, Partition: k.p})
	}
	clear(s.dirty)
	s.mu.Unlock()
	return out
}

// Close unsubscribes.
func (s *NoticeSub) Close() {
	h := s.hub
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		h.count.Add(-1)
	}
	h.mu.Unlock()
}

// remoteWake is the receiving side: one unbuffered token channel per topic. A peer's notice
// hands the token to one parked queue long-poll of the topic (a non-blocking send succeeds
// only while a waiter is parked on it); that waiter probes the owners and passes the token on
// if it found a full batch. Waking one instead of all keeps a commit elsewhere from turning
// every parked consumer here into a round of node RPCs.
type remoteWake struct {
	mu     sync.Mutex
	tokens map[string]chan struct{}
	counts map[string]uint64 // notices received per topic (drainedOwners compares them)
	resets uint64            // times counts was cleared (maxNoticeCounts)
}

func (r *remoteWake) init() {
	r.tokens = map[string]chan struct{}{}
	r.counts = map[string]uint64{}
}

// notices returns how many notices for topic this node has received.
func (r *remoteWake) notices(topic string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resets<<32 | r.counts[topic]
}

// token returns the topic's token channel (created on first use; never closed).
func (r *remoteWake) token(topic string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.tokens[topic]
	if !ok {
		ch = make(chan struct{})
		r.tokens[topic] = ch
	}
	return ch
}

// wakeOne hands the token to one parked waiter of topic, if any is parked.
func (r *remoteWake) wakeOne(topic string) {
	r.mu.Lock()
	ch, ok := r.tokens[topic]
	r.mu.Unlock()
	r.wake(ch, ok)
}

// notice counts a peer's notice for topic and wakes one parked waiter of it.
func (r *remoteWake) notice(topic string) {
	r.mu.Lock()
	if _, ok := r.counts[topic]; ok || len(r.counts) < maxNoticeCounts {
		r.counts[topic]++
	} else {
		clear(r.counts) // and resets makes every count differ from the marks made before
		r.resets++
		r.counts[topic] = 1
	}
	ch, ok := r.tokens[topic]
	r.mu.Unlock()
	r.wake(ch, ok)
}

// maxNoticeCounts bounds the topics whose notices are counted (topics that were deleted
// keep their count until the map is cleared).
const maxNoticeCounts = 4096

func (r *remoteWake) wake(ch chan struct{}, ok bool) {
	if !ok {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// RemoteNotice records a peer's notice (op 33 stream): one long-poll parked on the topic wakes
// and re-probes the owners.
func (e *Engine) RemoteNotice(topic string, partition int) {
	_ = partition // the probe asks the owner for any of its partitions
	e.remote.notice(topic)
}
