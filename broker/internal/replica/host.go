package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/log"
)

// ErrNotLeading: this node does not lead the partition (now); the follower looks the
// assignment up again (421 on the node RPC).
var ErrNotLeading = errcode.Sub("not the leader of this partition", errcode.ErrNotOwner)

// ErrOtherIncarnation: the follower's replica belongs to another incarnation of the topic
// (404 on the node RPC).
var ErrOtherIncarnation = errcode.Sub("another incarnation of the topic", errcode.ErrTopicGone)

// BelowLogStartError: a fetch below the leader's oldest retained offset. The follower empties
// its log to begin at LogStart and fetches from there (docs/internals/replication.md §5). It is
// a kind of errcode.ErrGone (410).
type BelowLogStartError struct{ LogStart int64 }

func (e *BelowLogStartError) Error() string {
	return fmt.Sprintf("fetch below the leader's log start %d", e.LogStart)
}

// Unwrap makes it a kind of errcode.ErrGone.
func (e *BelowLogStartError) Unwrap() error { return errcode.ErrGone }

// HostLog is what a Host needs of a led partition's log (log.Log has it).
type HostLog interface {
	LeaderLog
	ReadFrames(from int64, maxBytes int) ([]byte, int64, error)
	OldestOffset() int64
}

// hosted is one leadership a Host serves.
type hosted struct {
	incarnation string
	leader      *Leader
	log         HostLog
	epochs      *log.Epochs
}

type hostKey struct {
	topic string
	p     int
}

// Host is the set of leaderships this node holds now, and the leader side of their
// followers' calls (node-RPC ops 34 and 35). Safe for concurrent use.
type Host struct {
	hwmLinger time.Duration // DefaultHWMLinger; tests change it

	mu   sync.Mutex
	lead map[hostKey]*hosted
}

// NewHost returns an empty Host.
func NewHost() *Host { return &Host{hwmLinger: DefaultHWMLinger, lead: make(map[hostKey]*hosted)} }

// Lead makes ld the leadership of topic/p served to followers, replacing (and deposing) any
// earlier one.
func (h *Host) Lead(topic string, p int, incarnation string, ld *Leader, lg HostLog, epochs *log.Epochs) {
	h.mu.Lock()
	old := h.lead[hostKey{topic, p}]
	h.lead[hostKey{topic, p}] = &hosted{incarnation: incarnation, leader: ld, log: lg, epochs: epochs}
	h.mu.Unlock()
	if old != nil && old.leader != ld {
		old.leader.Depose()
	}
}

// Drop ends the leadership ld of topic/p (deposing it) if it is still the one served.
func (h *Host) Drop(topic string, p int, ld *Leader) {
	h.mu.Lock()
	cur := h.lead[hostKey{topic, p}]
	if cur != nil && cur.leader == ld {
		delete(h.lead, hostKey{topic, p})
	}
	h.mu.Unlock()
	ld.Depose()
}

// Leader returns the leadership of topic/p this node serves, if any.
func (h *Host) Leader(topic string, p int) (*Leader, bool) {
	hs, err := h.get(topic, p, "")
	if err != nil {
		return nil, false
	}
	return hs.leader, true
}

func (h *Host) get(topic string, p int, incarnation string) (*hosted, error) {
	h.mu.Lock()
	hs := h.lead[hostKey{topic, p}]
	h.mu.Unlock()
	switch {
	case hs == nil:
		return nil, fmt.Errorf("%s/%d: %w", topic, p, ErrNotLeading)
	case incarnation != "" && hs.incarnation != incarnation:
		return nil, fmt.Errorf("%s/%d: %w", topic, p, ErrOtherIncarnation)
	}
	return hs, nil
}

// DefaultHWMLinger is how long a parked fetch that has only a newer HWM to tell waits for records to
// send with it (docs/internals/replication.md §5). Under load the next record comes within it,
// and one answer then carries both: a follower's round trips per record fall from two (the
// records, then the HWM its own fetch moved) to one. The HWM is the only thing that waits: a
// follower's HWM trails the leader's by at most this much longer when no record follows, and
// no producer waits on it (a produce is answered once the leader's HWM passes its records).
const DefaultHWMLinger = 20 * time.Millisecond

// Fetch serves a follower's fetch of topic/p: frames from req.Offset at once when there are
// any, else it holds the call until records are appended, the leadership changes, or wait
// ends (then it answers with no frames). An HWM past req.HWM is answered too, after at most
// the Host's linger, DefaultHWMLinger (with the records appended meanwhile, if any).
func (h *Host) Fetch(ctx context.Context, topic string, p int, incarnation string, req FetchRequest, wait time.Duration) (FetchReply, error) {
	hs, err := h.get(topic, p, incarnation)
	if err != nil {
		return FetchReply{}, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var linger <-chan time.Time // set once the HWM alone is due
	for {
		notify := hs.log.NotifyC()
		changed := hs.leader.changedC()
		rep, err := h.serve(hs, req)
		if err != nil || len(rep.Frames) > 0 || rep.ConsumerState != nil || rep.FanoutCursors != nil {
			return rep, err
		}
		if rep.HWM > req.HWM && linger == nil {
			t := time.NewTimer(h.hwmLinger)
			defer t.Stop()
			linger = t.C
		}
		select {
		case <-notify:
		case <-changed:
		case <-linger:
			return h.serve(hs, req)
		case <-timer.C:
			return h.serve(hs, req) // fresh: the HWM and consumer state as of now
		case <-ctx.Done():
			return rep, nil // the caller's deadline: an empty answer, not an error (a consumer state in rep was not due)
		}
	}
}

// serve is one Leader.Serve with a fetch below the log start turned into BelowLogStartError.
func (h *Host) serve(hs *hosted, req FetchRequest) (FetchReply, error) {
	rep, err := hs.leader.Serve(req, hs.log, hs.epochs)
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		return FetchReply{}, &BelowLogStartError{LogStart: hs.log.OldestOffset()}
	}
	if errors.Is(err, log.ErrNotFrameBoundary) || errors.Is(err, log.ErrBeyondEnd) {
		return FetchReply{}, fmt.Errorf("%w: %w", errcode.ErrInvalid, err)
	}
	return rep, err
}

// EndOffset answers where epoch ends in the log of topic/p (log.Epochs.EndOffsetFor), for a
// follower of leaderEpoch.
func (h *Host) EndOffset(_ context.Context, topic string, p int, incarnation string, leaderEpoch, epoch uint64) (found uint64, end int64, ok bool, err error) {
	hs, err := h.get(topic, p, incarnation)
	if err != nil {
		return 0, 0, false, err
	}
	if cur := hs.leader.Epoch(); cur != leaderEpoch {
		return 0, 0, false, fmt.Errorf("%w: %d, leader is at %d", ErrStaleEpoch, leaderEpoch, cur)
	}
	if err := hs.leader.CheckLeading(); err != nil {
		return 0, 0, false, err
	}
	found, end, ok = hs.epochs.EndOffsetFor(epoch, hs.log.NextOffset())
	return found, end, ok, nil
}

// EpochOf is the epoch this node leads topic/p under, 0 when it does not lead it.
func (h *Host) EpochOf(topic string, p int) uint64 {
	if ld, ok := h.Leader(topic, p); ok {
		return ld.Epoch()
	}
	return 0
}
