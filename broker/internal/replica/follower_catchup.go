package replica

import "context"

// Catch-up (docs/internals/replication.md §5). A follower far behind its leader (an empty one
// copying the partition back, one that was down) is "behind": its last answer ended below the
// leader's HWM, so records committed on the ISR wait for it. With CatchUpMaxBytes set, a
// follower that is behind
//
//   - fetches CatchUpMaxBytes per call instead of MaxBytes: each fetch costs a round trip, the
//     leader's read and the follower's fsync whatever its size, so larger answers copy faster;
//   - sends its next fetch as soon as an answer arrives, while it appends and fsyncs that
//     answer's frames, so the leader's read and the transfer overlap the follower's write;
//   - appends with direct I/O (log.Log.AppendFramesDirect) an answer after which it is still
//     behind: the same bytes, fsync and verify, without the page cache's CPU per byte.
//
// The fetch sent ahead reports the end of the frames still being written as the follower's
// end offset. That is safe because that end is below the leader's HWM: the leader counts a
// follower's end toward the HWM only for an ISR member, and no ISR member is behind (the HWM is
// at most its end offset); and it adds a follower to the ISR only once its end has reached the
// HWM. A follower that fails before the frames are durable reports a lower end at its next
// fetch, which the leader takes as it takes a restarted follower's. A follower in the ISR is
// never behind, so the steady state keeps MaxBytes and one fetch at a time.

// DefaultCatchUpMaxBytes is the catch-up fetch size the replication manager gives followers.
// Node RPC carries up to 16 MiB per message.
const DefaultCatchUpMaxBytes = 8 << 20

// ahead is a fetch sent before the previous answer's frames were appended.
type ahead struct {
	offset int64
	done   chan fetched // buffered: the sender never blocks
}

type fetched struct {
	rep FetchReply
	err error
}

// fetchBytes is the max_bytes of the next fetch.
func (f *Follower) fetchBytes() int {
	if f.behind && f.CatchUpMaxBytes > 0 {
		return f.CatchUpMaxBytes
	}
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return 1 << 20
}

func (f *Follower) request(from int64) FetchRequest {
	return FetchRequest{Follower: f.Self, Epoch: f.Epoch, Offset: from, MaxBytes: f.fetchBytes(),
		HWM: f.Log.HighWatermark()}
}

// fetch returns the answer for a fetch from `from`: the one sent ahead when it asked from
// there, else a new fetch's. A fetch sent ahead from elsewhere is dropped.
func (f *Follower) fetch(ctx context.Context, from int64) (FetchReply, error) {
	if a := f.ahead; a != nil {
		f.ahead = nil
		if a.offset == from {
			select {
			case r := <-a.done:
				return r.rep, r.err
			case <-ctx.Done():
				return FetchReply{}, ctx.Err()
			}
		}
	}
	return f.Source.Fetch(ctx, f.request(from))
}

// noteReply records whether rep left the follower behind the leader's HWM and, when it did
// and catch-up is on, sends the fetch that follows rep at once.
func (f *Follower) noteReply(ctx context.Context, rep FetchReply) {
	f.behind = len(rep.Frames) > 0 && rep.Next < rep.HWM
	if !f.behind || f.CatchUpMaxBytes <= 0 {
		return
	}
	req := f.request(rep.Next)
	a := &ahead{offset: rep.Next, done: make(chan fetched, 1)}
	f.ahead = a
	go func() {
		rep, err := f.Source.Fetch(ctx, req)
		a.done <- fetched{rep: rep, err: err}
	}()
}

// directAppender is the bulk append of a log that has one (log.Log.AppendFramesDirect).
type directAppender interface {
	AppendFramesDirect(frames []byte) (int64, error)
}

// appendFrames appends a fetch answer's frames: directly when the answer leaves the follower
// behind and catch-up is on, else with AppendFrames (the steady state of an in-sync follower).
func (f *Follower) appendFrames(frames []byte) (int64, error) {
	if d, ok := f.Log.(directAppender); ok && f.behind && f.CatchUpMaxBytes > 0 {
		return d.AppendFramesDirect(frames)
	}
	return f.Log.AppendFrames(frames)
}
