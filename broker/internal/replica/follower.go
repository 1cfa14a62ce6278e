package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"narad.dev/broker/internal/log"
)

// ErrDiverged: the follower's log and the leader's differ below the follower's HWM (only an
// unclean election can cause it). The follower cannot fix it by truncating its hidden tail;
// the caller replaces the replica with a fresh copy.
var ErrDiverged = errors.New("replica: log diverged below the high watermark")

// FollowerLog is what a Follower needs of the partition log (log.Log has it).
type FollowerLog interface {
	NextOffset() int64
	HighWatermark() int64
	AppendFrames(frames []byte) (int64, error)
	AdvanceHWM(h int64) error
	TruncateTail(end int64) error
	// ResetTo empties the log and makes it start at start, past its end offset.
	ResetTo(start int64) error
}

// FetchRequest asks the leader for frames from Offset, the follower's LEO.
type FetchRequest struct {
	Follower string
	Epoch    uint64 // the leader epoch the follower follows
	Offset   int64
	MaxBytes int
	// HWM is the follower's HWM: a fetch parked for want of records returns as soon as the
	// leader's HWM is past it, so followers learn the HWM without waiting for new records.
	HWM int64
	// Buf, on the leader, is a buffer the answer's frames may be read into (its capacity is
	// reused; the transport recycles it once sent). nil: a new one.
	Buf []byte
}

// framesAppender is the read of a log that can read frames into a given buffer
// (log.Log.ReadFramesAppend).
type framesAppender interface {
	ReadFramesAppend(dst []byte, from int64, maxBytes int) ([]byte, int64, error)
}

// FetchReply is the leader's answer: frames from the request's offset up to Next (possibly
// none, after the leader's long-poll wait), the leader's HWM, and the leader-epoch entries
// covering [request offset, Next): the one in force at the offset and each later start.
type FetchReply struct {
	Frames []byte
	Next   int64
	HWM    int64
	Epochs []log.EpochEntry
	// ConsumerState is the leader's consumer state (an encoded consume.Checkpoint) when it is
	// due to this follower (ConsumerStateSync); nil otherwise.
	ConsumerState []byte
	// FanoutCursors are the leader's fan-out cursor positions (a cursorsync envelope), with
	// the cadence of ConsumerState; nil otherwise.
	FanoutCursors []byte
	// Release, when set, gives Frames' buffer back to the transport's pool; the follower
	// calls it once the frames are appended and uses them no more (an answer it drops is
	// left to the garbage collector).
	Release func()
}

// Source is the follower's way to its leader (node RPC in production). Errors of the leader
// side (ErrStaleEpoch, ErrDeposed, ErrNotReplica) come back wrapped.
type Source interface {
	// Fetch is a long-poll: it returns at once when there are frames past req.Offset, else
	// after a wait of the source's choosing.
	Fetch(ctx context.Context, req FetchRequest) (FetchReply, error)
	// EndOffset asks the leader where epoch ends in its log (log.Epochs.EndOffsetFor under
	// the leader's current epoch). ok is false when the leader knows no epoch ≤ epoch.
	EndOffset(ctx context.Context, leaderEpoch, epoch uint64) (found uint64, end int64, ok bool, err error)
}

// Follower follows one leader for one epoch.
type Follower struct {
	Self     string
	Epoch    uint64 // the leader epoch followed
	Log      FollowerLog
	Epochs   *log.Epochs
	Source   Source
	MaxBytes int // per fetch; 0 → 1 MiB
	// CatchUpMaxBytes is the fetch size while the follower is behind the leader's HWM, which
	// also sends each fetch before the previous answer is appended (follower_catchup.go);
	// 0 → neither: MaxBytes, one fetch at a time.
	CatchUpMaxBytes int
	// OnConsumerState stores the leader's consumer state a fetch brought
	// (docs/internals/replication.md §8). nil: it is dropped.
	OnConsumerState func(state []byte) error
	// OnFanoutCursors stores the leader's fan-out cursor positions a fetch brought
	// (docs/internals/replication.md §8). nil: they are dropped.
	OnFanoutCursors func(cursors []byte) error
	// PreCopySlots bounds the segment pre-copies running at once on this node (precopy.go):
	// one is taken before a pre-copy's buffers are made and given back when it ends. nil:
	// no bound.
	PreCopySlots chan struct{}

	behind bool   // the last answer ended below the leader's HWM
	ahead  *ahead // the fetch sent while behind, before the last answer was appended
}

// Run truncates a divergent suffix, then fetches and appends until ctx ends or the leader
// refuses (a new epoch: the caller starts a new Follower). It returns ctx's error or the
// refusal.
func (f *Follower) Run(ctx context.Context) error {
	if err := f.Reconcile(ctx); err != nil {
		return err
	}
	for {
		if err := f.FetchOnce(ctx); err != nil {
			return err
		}
	}
}

// Reconcile cuts the follower's log back to where it agrees with the leader
// (docs/internals/replication.md §7). It asks the leader where the newest epoch this replica
// wrote under ends in the leader's log; if the leader never had that epoch, everything
// written under it diverges, and the question is asked again for the epoch before. Records
// past the agreed end were never committed (never 202'd); records below the follower's HWM
// are never cut (ErrDiverged instead).
func (f *Follower) Reconcile(ctx context.Context) error {
	for {
		last, ok := f.Epochs.Latest()
		if !ok {
			return nil // nothing written under any epoch: nothing can diverge
		}
		leo := f.Log.NextOffset()
		found, end, known, err := f.Source.EndOffset(ctx, f.Epoch, last.Epoch)
		if err != nil {
			return err
		}
		switch {
		case !known:
			end = 0 // the leader's log starts after every epoch we know: none of ours is its
		case found < last.Epoch:
			end = min(end, last.Start) // our newest epoch is unknown to the leader: all of it goes
		}
		end = min(end, leo)
		if end < leo {
			if end < f.Log.HighWatermark() {
				return fmt.Errorf("%w: leader ends epoch %d at %d, HWM %d", ErrDiverged, last.Epoch, end, f.Log.HighWatermark())
			}
			if err := f.Log.TruncateTail(end); err != nil {
				return err
			}
		}
		before := len(f.Epochs.Entries())
		if err := f.Epochs.TruncateFrom(end); err != nil { // also an epoch that holds no record
			return err
		}
		if (known && found == last.Epoch) || len(f.Epochs.Entries()) == before {
			return nil
		}
	}
}

// FetchOnce does one fetch: epochs first, then frames, then the HWM.
func (f *Follower) FetchOnce(ctx context.Context) error {
	from := f.Log.NextOffset()
	rep, err := f.fetch(ctx, from)
	var below *BelowLogStartError
	if errors.As(err, &below) {
		return f.startAt(from, below.LogStart)
	}
	if err != nil {
		return err
	}
	if rep.Release != nil {
		defer rep.Release()
	}
	f.noteReply(ctx, rep)
	if len(rep.Frames) > 0 {
		for _, e := range rep.Epochs {
			if err := f.Epochs.Assign(e.Epoch, max(e.Start, from)); err != nil {
				return err
			}
		}
		next, err := f.appendFrames(rep.Frames)
		if err != nil {
			return err
		}
		if next != rep.Next {
			return fmt.Errorf("replica: appended up to %d, leader said %d", next, rep.Next)
		}
	}
	if h := min(rep.HWM, f.Log.NextOffset()); h > f.Log.HighWatermark() {
		if err := f.Log.AdvanceHWM(h); err != nil {
			return err
		}
	}
	if len(rep.ConsumerState) > 0 && f.OnConsumerState != nil {
		if err := f.OnConsumerState(rep.ConsumerState); err != nil {
			return err
		}
	}
	if len(rep.FanoutCursors) > 0 && f.OnFanoutCursors != nil {
		return f.OnFanoutCursors(rep.FanoutCursors)
	}
	return nil
}

// startAt answers a fetch from `from` refused as below the leader's log start: retention
// removed the start of the leader's log, and everything this log holds lies below it
// (docs/internals/replication.md §5). The log is emptied to begin at logStart, its leader-epoch
// history first (a crash between the two leaves a log with no epochs to reconcile, which
// fetches, is refused and resets again); the next fetch asks from logStart.
func (f *Follower) startAt(from, logStart int64) error {
	if logStart <= from {
		return fmt.Errorf("replica: leader refused offset %d as below its log start %d", from, logStart)
	}
	if err := f.Epochs.TruncateFrom(0); err != nil {
		return err
	}
	return f.Log.ResetTo(logStart)
}

// Serve answers a follower's fetch on the leader (the other side of Source.Fetch, minus the
// transport and the long-poll wait, which belong to the caller): it records the follower's
// LEO, then reads frames from req.Offset (into req.Buf when the log can: framesAppender).
// epochs is the leader's leader-epoch file.
func (l *Leader) Serve(req FetchRequest, lg interface {
	ReadFrames(from int64, maxBytes int) ([]byte, int64, error)
}, epochs *log.Epochs) (FetchReply, error) {
	// Read first: it proves req.Offset is a frame boundary within the log, so a follower's
	// LEO that the HWM may take is always one.
	var frames []byte
	var next int64
	var err error
	if a, ok := lg.(framesAppender); ok && req.Buf != nil {
		frames, next, err = a.ReadFramesAppend(req.Buf[:0], req.Offset, req.MaxBytes)
	} else {
		frames, next, err = lg.ReadFrames(req.Offset, req.MaxBytes)
	}
	if err != nil {
		return FetchReply{}, err
	}
	if err := l.Fetched(req.Follower, req.Epoch, req.Offset); err != nil {
		return FetchReply{}, err
	}
	rep := FetchReply{Frames: frames, Next: next, HWM: l.log.HighWatermark()}
	rep.ConsumerState, rep.FanoutCursors = l.consumerStateFor(req.Follower)
	if len(frames) > 0 {
		rep.Epochs = epochsCovering(epochs.Entries(), req.Offset, next)
	}
	return rep, nil
}

// ConsumerStateSync is how often, at most, a follower is sent the leader's consumer state
// (consumer_state_sync, docs/internals/replication.md §8).
const ConsumerStateSync = time.Second

// consumerStateFor returns the consumer state and the fan-out cursors to send follower f with
// this answer: each current one when ConsumerStateSync has passed since f was last considered
// and it changed since f was last sent it; nil otherwise.
func (l *Leader) consumerStateFor(f string) (state, cursors []byte) {
	if l.state == nil && l.cursors == nil {
		return nil, nil
	}
	now := l.now()
	l.mu.Lock()
	fs := l.followers[f]
	due := fs != nil && now.Sub(fs.stateAt) >= ConsumerStateSync
	l.mu.Unlock()
	if !due {
		return nil, nil
	}
	if l.state != nil {
		state = l.state()
	}
	if l.cursors != nil {
		cursors = l.cursors()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fs.stateAt = now
	return changed(state, &fs.stateSent), changed(cursors, &fs.cursorSent)
}

// changed returns b and records it in *sent when b is not nil and differs from *sent; nil
// otherwise.
func changed(b []byte, sent *string) []byte {
	if b == nil || string(b) == *sent {
		return nil
	}
	*sent = string(b)
	return b
}

// epochsCovering returns the entries in force over [from, to): the last starting at or before
// from, and every one starting inside.
func epochsCovering(all []log.EpochEntry, from, to int64) []log.EpochEntry {
	var out []log.EpochEntry
	for i, e := range all {
		inForce := e.Start <= from && (i+1 == len(all) || all[i+1].Start > from)
		if inForce || (e.Start > from && e.Start < to) {
			out = append(out, e)
		}
	}
	return out
}
