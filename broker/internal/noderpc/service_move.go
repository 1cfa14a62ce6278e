package noderpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/mem"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// MoveSource is the source side of a partition move (ops 22–24, docs/internals/moves.md §3–§4),
// implemented by *engine.Engine. Its errors answer by errcode.Source: ErrNotOwner (421),
// ErrTopicGone or ErrNotFound (404), the fence sentinels (409 with a reason), else 503.
type MoveSource interface {
	TransferListing(ctx context.Context, topic string, p int) (transfer.Listing, error)
	ReadSegmentChunk(ctx context.Context, topic string, p int, base, at int64, buf []byte) (int, error)
	PrepareHandoff(ctx context.Context, topic string, p int, req transfer.PrepareRequest) (transfer.Listing, error)
}

// MoveReporter is the destination's view of its own moves (op 30), implemented by
// *move.Runner: false means this node runs no worker for the move (404).
type MoveReporter interface {
	Report(topic string, p int) (transfer.Report, bool)
}

// Decommissioner is the leader's decommission surface (op 25, docs/internals/moves.md §12),
// implemented by *controller.Controller. Errors: meta.ErrNotFound (404), controller.ErrRefused
// (409, the Verdict carries the reasons), controller.ErrRemoved (409), meta.ErrNotLeader (421
// on the node plane), else 503. DecommissionForce also refuses with controller.ErrBadForce
// (409, no reasons) and controller.ErrRefused with the Verdict's Missing partitions.
type Decommissioner interface {
	Decommission(ctx context.Context, id string, dryRun bool) (controller.Verdict, error)
	DecommissionForce(ctx context.Context, id string, lose []controller.PartitionRef) (controller.Verdict, error)
	CancelDecommission(ctx context.Context, id string) error
	DecommissionBlocked() map[string][]string
}

// MoveDeps are the objects behind ops 22–25 and 30 and the move/decommission endpoints. A
// nil member makes the ops it serves answer 503, so a node wired without it stays safe.
type MoveDeps struct {
	Source   MoveSource
	Reporter MoveReporter
	Decom    Decommissioner
	// Elector serves op 36 (service_elect.go); nil: it answers 503.
	Elector LeaderElector
}

// ErrMoveUnwired answers an op whose object this node was built without.
var ErrMoveUnwired = errors.New("moves are not available on this node")

// badPartition reports a request naming no topic or a negative partition (400).
func badPartition(topic string, p int32) bool { return topic == "" || p < 0 }

// ListPartitionSegments (op 22): the owner's transfer listing (docs/internals/moves.md §4.1).
func (s *Service) ListPartitionSegments(ctx context.Context, req *nodepb.ListPartitionSegmentsRequest) (*nodepb.ListPartitionSegmentsReply, error) {
	if badPartition(req.Topic, req.Partition) {
		return &nodepb.ListPartitionSegmentsReply{Status: 400, Error: "topic and a partition ≥ 0 are required"}, nil
	}
	if s.mv.Source == nil {
		return &nodepb.ListPartitionSegmentsReply{Status: 503, Error: ErrMoveUnwired.Error()}, nil
	}
	l, err := s.mv.Source.TransferListing(ctx, req.Topic, int(req.Partition))
	if err != nil {
		st, reason, msg := errcode.Source.Reply(err)
		return &nodepb.ListPartitionSegmentsReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return &nodepb.ListPartitionSegmentsReply{Status: 503, Error: err.Error()}, nil
	}
	return &nodepb.ListPartitionSegmentsReply{Status: 200, ListingJson: b}, nil
}

// segmentRefusal checks an op-23 request, single or streamed: a status and reason to refuse
// it with, or 0.
func (s *Service) segmentRefusal(topic string, p int32, base, at, n int64) (int32, string) {
	switch {
	case badPartition(topic, p):
		return 400, "topic and a partition ≥ 0 are required"
	case base < 0 || at < 0 || n <= 0:
		return 400, "base and at must be ≥ 0 and len > 0"
	case s.mv.Source == nil:
		return 503, ErrMoveUnwired.Error()
	}
	return 0, ""
}

// FetchSegmentChunk (op 23): up to len committed bytes of one segment (docs/internals/moves.md §4.2);
// a length over transfer.ChunkBytes is clamped to it.
func (s *Service) FetchSegmentChunk(ctx context.Context, req *nodepb.FetchSegmentChunkRequest) (*nodepb.FetchSegmentChunkReply, error) {
	if st, msg := s.segmentRefusal(req.Topic, req.Partition, req.Base, req.At, int64(req.Len)); st != 0 {
		return &nodepb.FetchSegmentChunkReply{Status: st, Error: msg}, nil
	}
	buf := make([]byte, min(int(req.Len), transfer.ChunkBytes))
	k, err := s.mv.Source.ReadSegmentChunk(ctx, req.Topic, int(req.Partition), req.Base, req.At, buf)
	if err != nil {
		st, reason, msg := errcode.Source.Reply(err)
		return &nodepb.FetchSegmentChunkReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	return &nodepb.FetchSegmentChunkReply{Status: 200, Data: buf[:min(k, len(buf))]}, nil
}

// StreamSegment (op 23 streamed, docs/internals/node-rpc.md §1): the committed bytes of one segment from
// at on, up to len, in replies of at most chunk (≤ transfer.ChunkBytes); the stream ends early at the
// committed boundary (a short read). A refusal or a failed read is one reply with its status,
// as op 23 answers it, after the chunks already sent. A stream opened with the segment codec
// gets each chunk as the pooled buffer it was read into (no copy); otherwise each is sent as a
// protobuf reply.
func (s *Service) StreamSegment(req *nodepb.StreamSegmentRequest, stream nodepb.Node_StreamSegmentServer) error {
	refuse := func(status int32, reason errcode.Reason, msg string) error {
		return stream.Send(&nodepb.FetchSegmentChunkReply{Status: status, Error: msg, Reason: string(reason)})
	}
	if st, msg := s.segmentRefusal(req.Topic, req.Partition, req.Base, req.At, req.Len); st != 0 {
		return refuse(st, "", msg)
	}
	ctx := stream.Context()
	raw := rpc.SegmentCodecIn(ctx)
	rerr, serr := s.readSegment(ctx, rpc.SegmentRequest{Topic: req.Topic, Partition: req.Partition,
		Base: req.Base, At: req.At, Len: req.Len, Chunk: req.Chunk}, func(buf *[]byte) error {
		if raw {
			return stream.SendMsg(&rpc.SegmentChunk{Status: 200, Data: mem.NewBuffer(buf, rpc.Buffers)})
		}
		defer rpc.Buffers.Put(buf) // the protobuf codec copies it
		return stream.Send(&nodepb.FetchSegmentChunkReply{Status: 200, Data: *buf})
	})
	switch {
	case serr != nil:
		return serr
	case rerr != nil:
		return refuse(errcode.Source.Reply(rerr))
	}
	return nil
}

// SendSegment serves a raw segment stream (rpc.SegmentSender, docs/internals/node-rpc.md
// §1.2): the same bytes, chunks and refusals as StreamSegment, each chunk written from the
// pooled buffer it was read into.
func (s *Service) SendSegment(ctx context.Context, req rpc.SegmentRequest, out *rpc.SegmentWriter) {
	if st, msg := s.segmentRefusal(req.Topic, req.Partition, req.Base, req.At, req.Len); st != 0 {
		_ = out.Refuse(st, "", msg)
		return
	}
	rerr, serr := s.readSegment(ctx, req, func(buf *[]byte) error {
		defer rpc.Buffers.Put(buf)
		return out.Data(*buf)
	})
	switch {
	case serr != nil: // the receiver is gone
	case rerr != nil:
		st, reason, msg := errcode.Source.Reply(rerr)
		_ = out.Refuse(st, string(reason), msg)
	default:
		_ = out.End()
	}
}

// readSegment reads the committed bytes req asks for (op 23 streamed) in chunks of at most
// req.Chunk (≤ transfer.ChunkBytes) and hands each to send in a buffer of rpc.Buffers, cut to
// the bytes read, which send owns from then on. It stops at the committed boundary (a short
// read). readErr is the source's refusal or failed read, after the chunks already sent;
// sendErr is send's failure (the receiver is gone).
func (s *Service) readSegment(ctx context.Context, req rpc.SegmentRequest, send func(buf *[]byte) error) (readErr, sendErr error) {
	chunk := int64(transfer.ChunkBytes)
	if req.Chunk > 0 && int64(req.Chunk) < chunk {
		chunk = int64(req.Chunk)
	}
	for at, left := req.At, req.Len; left > 0; {
		n := int(min(left, chunk))
		buf := rpc.Buffers.Get(n)
		k, err := s.mv.Source.ReadSegmentChunk(ctx, req.Topic, int(req.Partition), req.Base, at, (*buf)[:n])
		k = min(k, n)
		if err != nil || k == 0 {
			rpc.Buffers.Put(buf)
			return err, nil
		}
		*buf = (*buf)[:k]
		if err := send(buf); err != nil {
			return nil, err
		}
		at, left = at+int64(k), left-int64(k)
		if k < n {
			return nil, nil // the committed boundary
		}
	}
	return nil, nil
}

// PrepareHandoff (op 24): arm, re-arm or fence the handoff freeze (docs/internals/moves.md §3.3).
func (s *Service) PrepareHandoff(ctx context.Context, req *nodepb.PrepareHandoffRequest) (*nodepb.PrepareHandoffReply, error) {
	switch {
	case badPartition(req.Topic, req.Partition):
		return &nodepb.PrepareHandoffReply{Status: 400, Error: "topic and a partition ≥ 0 are required"}, nil
	case req.TtlMs < 0:
		return &nodepb.PrepareHandoffReply{Status: 400, Error: "ttl_ms must be ≥ 0"}, nil
	case req.Fence && req.Token == "":
		return &nodepb.PrepareHandoffReply{Status: 400, Error: "a fence needs the token of the freeze it checks"}, nil
	case s.mv.Source == nil:
		return &nodepb.PrepareHandoffReply{Status: 503, Error: ErrMoveUnwired.Error()}, nil
	}
	pr := transfer.PrepareRequest{Token: req.Token, Fence: req.Fence, ExpectHWM: req.ExpectHwm,
		TTL: time.Duration(req.TtlMs) * time.Millisecond}
	l, err := s.mv.Source.PrepareHandoff(ctx, req.Topic, int(req.Partition), pr)
	if err != nil {
		st, reason, msg := errcode.Source.Reply(err)
		return &nodepb.PrepareHandoffReply{Status: st, Reason: string(reason), Error: msg}, nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return &nodepb.PrepareHandoffReply{Status: 503, Error: err.Error()}, nil
	}
	return &nodepb.PrepareHandoffReply{Status: 200, ListingJson: b}, nil
}

// DecommissionMember (op 25): served on the Raft leader only (421 + hint elsewhere).
func (s *Service) DecommissionMember(ctx context.Context, req *nodepb.DecommissionMemberRequest) (*nodepb.DecommissionMemberReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.DecommissionMemberReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	call := DecomCall{ID: req.Id, Cancel: req.Cancel, DryRun: req.DryRun, BlockedOnly: req.BlockedOnly, Force: req.Force}
	var err error
	if call.Lose, err = decodeLose(req.LoseJson); err != nil {
		return &nodepb.DecommissionMemberReply{Status: 400, Error: err.Error()}, nil
	}
	rep := RunDecommission(ctx, s.mv, call)
	out := &nodepb.DecommissionMemberReply{Status: rep.Status, Error: rep.Error}
	if rep.Status == 421 {
		_, out.LeaderHint = s.store.Leader()
	}
	if rep.Verdict.Node != "" {
		out.VerdictJson, _ = json.Marshal(rep.Verdict) // plain fields: cannot fail
	}
	if rep.Blocked != nil {
		out.BlockedJson, _ = json.Marshal(rep.Blocked)
	}
	return out, nil
}

// MoveReport (op 30): this node's own report of a move it is the destination of.
func (s *Service) MoveReport(ctx context.Context, req *nodepb.MoveReportRequest) (*nodepb.MoveReportReply, error) {
	if badPartition(req.Topic, req.Partition) {
		return &nodepb.MoveReportReply{Status: 400, Error: "topic and a partition ≥ 0 are required"}, nil
	}
	if s.mv.Reporter == nil {
		return &nodepb.MoveReportReply{Status: 503, Error: ErrMoveUnwired.Error()}, nil
	}
	r, ok := s.mv.Reporter.Report(req.Topic, int(req.Partition))
	if !ok {
		return &nodepb.MoveReportReply{Status: 404, Error: "no move worker for this partition on this node"}, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return &nodepb.MoveReportReply{Status: 503, Error: err.Error()}, nil
	}
	return &nodepb.MoveReportReply{Status: 200, ReportJson: b}, nil
}

// decodeLose decodes op 25's lose_json: absent is nil; anything but a JSON array of
// {"topic", "partition"} with a non-empty topic and a partition ≥ 0 is an error.
func decodeLose(b []byte) ([]controller.PartitionRef, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var out []controller.PartitionRef
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("undecodable lose list: %w", err)
	}
	for _, r := range out {
		if r.Topic == "" || r.Partition < 0 {
			return nil, fmt.Errorf("bad lose entry %q/%d", r.Topic, r.Partition)
		}
	}
	return out, nil
}

// DecomCall is one decommission request, local or arriving as op 25.
type DecomCall struct {
	ID          string
	Cancel      bool
	DryRun      bool
	BlockedOnly bool
	// Force: a forced decommission of a dead node giving up Lose, which must be exactly its
	// single-replica partitions (controller.DecommissionForce).
	Force bool
	Lose  []controller.PartitionRef
}

// DecomResult is a decommission's answer in op 25's vocabulary: 200 (dry run, blocked-only,
// force: Verdict.Lost lists what was given up),
// 204 (done), 404, 409 (Verdict carries the reasons of a refusal), 421, 503.
type DecomResult struct {
	Status  int32
	Error   string
	Verdict controller.Verdict
	Blocked map[string][]string
}

// RunDecommission performs c with the leader's Decommissioner. The caller has checked that
// this node leads.
func RunDecommission(ctx context.Context, d MoveDeps, c DecomCall) DecomResult {
	if d.Decom == nil {
		return DecomResult{Status: 503, Error: ErrMoveUnwired.Error()}
	}
	if c.BlockedOnly {
		b := d.Decom.DecommissionBlocked()
		if b == nil {
			b = map[string][]string{}
		}
		return DecomResult{Status: 200, Blocked: b}
	}
	if c.ID == "" {
		return DecomResult{Status: 400, Error: "member id is required"}
	}
	if c.Cancel {
		if err := d.Decom.CancelDecommission(ctx, c.ID); err != nil {
			return DecomResult{Status: errcode.Decommission.Status(err), Error: err.Error()}
		}
		return DecomResult{Status: 204}
	}
	var v controller.Verdict
	var err error
	switch {
	case c.Force && c.DryRun:
		return DecomResult{Status: 400, Error: "force and dry_run cannot be combined"}
	case c.Force:
		v, err = d.Decom.DecommissionForce(ctx, c.ID, c.Lose)
	default:
		v, err = d.Decom.Decommission(ctx, c.ID, c.DryRun)
	}
	if v.Node == "" {
		v.Node = c.ID
	}
	if v.Reasons == nil {
		v.Reasons = []string{}
	}
	if err != nil {
		return DecomResult{Status: errcode.Decommission.Status(err), Error: err.Error(), Verdict: v}
	}
	if c.DryRun || c.Force {
		if c.Force && v.Lost == nil {
			v.Lost = []controller.LostPartition{}
		}
		return DecomResult{Status: 200, Verdict: v}
	}
	return DecomResult{Status: 204, Verdict: v}
}
