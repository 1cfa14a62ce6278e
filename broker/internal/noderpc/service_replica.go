package noderpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/log"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// maxReplicaFetchWait bounds how long a follower's fetch may be held (the follower asks for
// less; this only keeps a bad request from pinning a call).
const maxReplicaFetchWait = 30 * time.Second

// maxReplicaFetchBytes bounds the frames of one fetch answer (at least one whole frame is
// always sent, whatever its size): a follower in the ISR asks for 1 MiB, one catching up for
// replica.DefaultCatchUpMaxBytes.
const maxReplicaFetchBytes = replica.DefaultCatchUpMaxBytes

// errNoPeerID refuses a fetch from a connection without a claimed node ID.
var errNoPeerID = errcode.Sub("caller has no node id", errcode.ErrInvalid)

// ReplicaFetch (op 34) serves a follower's fetch on the leader of a replicated partition
// (docs/internals/replication.md §5). The follower is the node the connection authenticated.
func (s *Service) ReplicaFetch(ctx context.Context, req *nodepb.ReplicaFetchRequest) (*nodepb.ReplicaFetchReply, error) {
	return s.replicaFetch(ctx, req), nil
}

// ReplicaFetchStream (op 37) is op 34 on one stream (docs/internals/replication.md §5): each
// request is answered as op 34 answers it, in order, until the follower ends the stream.
// Requests are served one at a time: a follower that sends more before reading the answers
// is held back by the stream's flow-control window.
func (s *Service) ReplicaFetchStream(stream nodepb.Node_ReplicaFetchStreamServer) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // the follower ended the stream or is gone
		}
		if err := stream.Send(s.replicaFetch(ctx, req)); err != nil {
			return err
		}
	}
}

// replicaFetch answers one follower fetch, for op 34 and op 37.
func (s *Service) replicaFetch(ctx context.Context, req *nodepb.ReplicaFetchRequest) *nodepb.ReplicaFetchReply {
	follower, ok := rpc.PeerNodeID(ctx)
	if s.replicas == nil {
		return replicaFetchRefusal(replica.ErrNotLeading)
	}
	if !ok {
		return replicaFetchRefusal(errNoPeerID)
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 || maxBytes > maxReplicaFetchBytes {
		maxBytes = maxReplicaFetchBytes
	}
	wait := min(time.Duration(max(req.WaitMs, 0))*time.Millisecond, maxReplicaFetchWait)
	fr := replica.FetchRequest{Follower: follower, Epoch: req.LeaderEpoch, Offset: req.FetchOffset, MaxBytes: maxBytes,
		HWM: req.FollowerHwm}
	// Called with the segment codec, the frames are read into a pooled buffer, which the codec
	// hands back to the pool once the transport has sent it (rpc/fetch.go); an answer that
	// does not carry it gives it back now.
	var buf *[]byte
	if rpc.SegmentCodecIn(ctx) {
		buf = rpc.FetchBuffers.Get(maxBytes)
		fr.Buf = *buf
	}
	rep, err := s.replicas.Fetch(ctx, req.Topic, int(req.Partition), req.Incarnation, fr, wait)
	if buf != nil && (len(rep.Frames) == 0 || unsafe.SliceData(rep.Frames) != unsafe.SliceData(*buf)) {
		rpc.FetchBuffers.Put(buf)
	}
	if err != nil {
		out := replicaFetchRefusal(err)
		out.LeaderEpoch = s.replicas.EpochOf(req.Topic, int(req.Partition))
		return out
	}
	out := &nodepb.ReplicaFetchReply{Status: 200, Frames: rep.Frames, NextOffset: rep.Next, Hwm: rep.HWM,
		LeaderEpoch: req.LeaderEpoch, ConsumerState: rep.ConsumerState, FanoutCursors: rep.FanoutCursors}
	for _, e := range rep.Epochs {
		out.Epochs = append(out.Epochs, &nodepb.EpochStart{Epoch: e.Epoch, Start: e.Start})
	}
	return out
}

// replicaFetchRefusal is the reply of a refused fetch; a fetch below the leader's log start
// carries the log start (410).
func replicaFetchRefusal(err error) *nodepb.ReplicaFetchReply {
	st, reason, msg := errcode.Replica.Reply(err)
	out := &nodepb.ReplicaFetchReply{Status: st, Error: msg, Reason: string(reason)}
	var below *replica.BelowLogStartError
	if errors.As(err, &below) {
		out.LogStart = below.LogStart
	}
	return out
}

// ReplicaEndOffset (op 35) answers where an epoch ends in the leader's log
// (docs/internals/replication.md §7).
func (s *Service) ReplicaEndOffset(ctx context.Context, req *nodepb.ReplicaEndOffsetRequest) (*nodepb.ReplicaEndOffsetReply, error) {
	if s.replicas == nil {
		st, reason, msg := errcode.Replica.Reply(replica.ErrNotLeading)
		return &nodepb.ReplicaEndOffsetReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	found, end, known, err := s.replicas.EndOffset(ctx, req.Topic, int(req.Partition), req.Incarnation, req.LeaderEpoch, req.Epoch)
	if err != nil {
		st, reason, msg := errcode.Replica.Reply(err)
		return &nodepb.ReplicaEndOffsetReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	return &nodepb.ReplicaEndOffsetReply{Status: 200, Known: known, Epoch: found, EndOffset: end}, nil
}

// ReplicaHost is the leader side of this node's replicated partitions (replica.Host).
type ReplicaHost interface {
	Fetch(ctx context.Context, topic string, p int, incarnation string, req replica.FetchRequest, wait time.Duration) (replica.FetchReply, error)
	EndOffset(ctx context.Context, topic string, p int, incarnation string, leaderEpoch, epoch uint64) (uint64, int64, bool, error)
	// EpochOf is the epoch this node leads topic/p under (0 when it does not).
	EpochOf(topic string, p int) uint64
	// Leader is this node's leadership of topic/p, if it leads it.
	Leader(topic string, p int) (*replica.Leader, bool)
}

var _ ReplicaHost = (*replica.Host)(nil)

// replicaSource is a follower's replica.Source over ops 37 (34 with a leader that lacks it)
// and 35 to one leader. Its fetches share one stream, opened by the first and reopened after
// any failure; the stream lives as long as the context of the fetch that opened it (the
// follower's, in production), so it ends with the follower.
type replicaSource struct {
	peers       Peers
	addr        string
	topic       string
	partition   int
	incarnation string
	wait        time.Duration

	mu     sync.Mutex // one fetch at a time: a stream answers in order
	stream nodepb.Node_ReplicaFetchStreamClient
	cancel context.CancelFunc // ends stream
	unary  bool               // the leader answered op 37 Unimplemented: op 34 per fetch
}

// ReplicaSource returns the replica.Source a follower of topic/p uses to reach the leader at
// addr (its cluster address); a fetch with nothing to return is held up to wait.
func (p Peers) ReplicaSource(addr, topic string, partition int, incarnation string, wait time.Duration) replica.Source {
	return &replicaSource{peers: p, addr: addr, topic: topic, partition: partition, incarnation: incarnation, wait: wait}
}

// Fetch implements replica.Source. Refusals wrap the leader's sentinel (errcode.Replica: stale
// epoch, not the leader, gone: a *replica.BelowLogStartError); a fetch that fails in transport
// wraps errcode.ErrUnavailable, and so does one the leader leaves unanswered past the wait plus
// rpc.ConsumeCallSlack (the deadline op 34 gets).
func (r *replicaSource) Fetch(ctx context.Context, req replica.FetchRequest) (replica.FetchReply, error) {
	wire := &nodepb.ReplicaFetchRequest{
		Topic: r.topic, Partition: int32(r.partition), Incarnation: r.incarnation, LeaderEpoch: req.Epoch,
		FetchOffset: req.Offset, MaxBytes: int32(min(req.MaxBytes, maxReplicaFetchBytes)),
		WaitMs: r.wait.Milliseconds(), FollowerHwm: req.HWM,
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var rep *nodepb.ReplicaFetchReply
	var err error
	if r.unary {
		rep, err = r.fetchUnary(ctx, wire)
	} else {
		rep, err = r.fetchStreamed(ctx, wire)
	}
	if err != nil {
		return replica.FetchReply{}, replicaTransport(err)
	}
	return replicaReply(rep)
}

// fetchUnary is one op 34 call.
func (r *replicaSource) fetchUnary(ctx context.Context, wire *nodepb.ReplicaFetchRequest) (*nodepb.ReplicaFetchReply, error) {
	c, err := r.peers.pool.Client(r.addr)
	if err != nil {
		return nil, err
	}
	return c.ReplicaFetch(ctx, wire, rpc.WithSegmentCodec()) // the frames are not copied by protobuf (rpc/fetch.go)
}

// fetchStreamed sends wire on the stream (opening it first if there is none) and reads its
// answer. Any failure closes the stream; a leader without op 37 turns the source to op 34.
// Caller holds mu.
func (r *replicaSource) fetchStreamed(ctx context.Context, wire *nodepb.ReplicaFetchRequest) (*nodepb.ReplicaFetchReply, error) {
	if r.stream == nil {
		c, err := r.peers.pool.Client(r.addr)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithCancel(ctx)
		st, err := c.ReplicaFetchStream(sctx, rpc.WithSegmentCodec())
		if err != nil {
			cancel()
			return nil, err
		}
		r.stream, r.cancel = st, cancel
	}
	// The call's own context and a deadline end the stream, as they would end an op 34 call.
	limit := time.AfterFunc(rpc.WaitDeadline(wire.WaitMs), r.cancel)
	stop := context.AfterFunc(ctx, r.cancel)
	rep, err := r.exchange(wire)
	timedOut, cancelled := !limit.Stop(), !stop()
	switch {
	case timedOut: // the stream is ended even when the answer raced the timer
		err = status.Errorf(codes.DeadlineExceeded, "replica fetch: no answer within %v", rpc.WaitDeadline(wire.WaitMs))
	case cancelled:
		err = status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		r.cancel()
		r.stream, r.cancel = nil, nil
		if status.Code(err) == codes.Unimplemented {
			r.unary = true
			return r.fetchUnary(ctx, wire)
		}
		return nil, err
	}
	return rep, nil
}

// exchange sends one request on the stream and receives its answer.
func (r *replicaSource) exchange(wire *nodepb.ReplicaFetchRequest) (*nodepb.ReplicaFetchReply, error) {
	if err := r.stream.Send(wire); err != nil {
		_, rerr := r.stream.Recv() // Send reports io.EOF for a stream the server ended: its status is here
		if rerr != nil && rerr != io.EOF {
			return nil, rerr
		}
		return nil, err
	}
	return r.stream.Recv()
}

// replicaReply reads an op 34/37 answer.
func replicaReply(rep *nodepb.ReplicaFetchReply) (replica.FetchReply, error) {
	if rep.Status != 200 {
		err := errcode.Replica.Error(rep.Status, rep.Reason, rep.Error)
		if rep.Status == 410 {
			return replica.FetchReply{}, &replica.BelowLogStartError{LogStart: rep.LogStart}
		}
		return replica.FetchReply{}, err
	}
	out := replica.FetchReply{Frames: rep.Frames, Next: rep.NextOffset, HWM: rep.Hwm, ConsumerState: rep.ConsumerState,
		FanoutCursors: rep.FanoutCursors}
	if frames := rep.Frames; len(frames) > 0 {
		out.Release = func() { rpc.ReleaseFetchFrames(frames) }
	}
	for _, e := range rep.Epochs {
		out.Epochs = append(out.Epochs, log.EpochEntry{Epoch: e.Epoch, Start: e.Start})
	}
	return out, nil
}

// EndOffset implements replica.Source.
func (r *replicaSource) EndOffset(ctx context.Context, leaderEpoch, epoch uint64) (uint64, int64, bool, error) {
	c, err := r.peers.pool.Client(r.addr)
	if err != nil {
		return 0, 0, false, replicaTransport(err)
	}
	rep, err := c.ReplicaEndOffset(ctx, &nodepb.ReplicaEndOffsetRequest{
		Topic: r.topic, Partition: int32(r.partition), Incarnation: r.incarnation, LeaderEpoch: leaderEpoch, Epoch: epoch,
	})
	if err != nil {
		return 0, 0, false, replicaTransport(err)
	}
	if rep.Status != 200 {
		return 0, 0, false, errcode.Replica.Error(rep.Status, rep.Reason, rep.Error)
	}
	return rep.Epoch, rep.EndOffset, rep.Known, nil
}

// replicaTransport reads the transport error of an op 34/35 call (errcode.TransportStatus).
func replicaTransport(err error) error {
	return errcode.Replica.Error(errcode.TransportStatus(err), "", err.Error())
}

// segmentSource is a follower's replica.SegmentSource: the move transfer plane (ops 22 and
// 23 streamed) bound to one leader and partition.
type segmentSource struct {
	t         transferSource
	addr      string
	topic     string
	partition int
}

// ReplicaSegments returns the replica.SegmentSource a follower of topic/p uses to pre-copy the
// sealed segments of the leader at addr (docs/internals/replication.md §5).
func (p Peers) ReplicaSegments(addr, topic string, partition int) replica.SegmentSource {
	return segmentSource{t: transferSource{p: p}, addr: addr, topic: topic, partition: partition}
}

// List implements replica.SegmentSource (op 22).
func (s segmentSource) List(ctx context.Context) (transfer.Listing, error) {
	return s.t.List(ctx, s.addr, s.topic, s.partition)
}

// Stream implements replica.SegmentSource (op 23 streamed).
func (s segmentSource) Stream(ctx context.Context, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	return s.t.Stream(ctx, s.addr, s.topic, s.partition, base, at, n, chunk)
}
