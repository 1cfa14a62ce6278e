package noderpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// prepareCallTimeout bounds one PrepareHandoff call: the default deadline plus the lease drain
// an arm may spend before it reads the listing (docs/internals/moves.md §3.3).
const prepareCallTimeout = rpc.DefaultCallTimeout + transfer.LeaseDrainBound

// ErrPeerTooOld reports a peer that does not implement the op (gRPC Unimplemented): it runs
// an older release (docs/internals/node-rpc.md §3).
var ErrPeerTooOld = errors.New("peer does not implement this op")

// transferSource implements transfer.Source over node RPC ops 22–24: every error wraps
// transfer.ErrNotOwner (421), transfer.ErrNotFound (404), a fence sentinel (409) or
// transfer.ErrUnavailable (anything else, transport failures included).
type transferSource struct {
	p Peers
}

var _ transfer.Source = transferSource{}

// NewTransferSource returns the transfer.Source a move runner uses to reach sources.
func NewTransferSource(p Peers) transfer.Source { return transferSource{p: p} }

// sourceError reads an op 22–24 reply (errcode.Source): nil (2xx) or a transfer sentinel; a
// 409 names its fence by reason.
func sourceError(status int32, reason, msg string) error {
	if status == 409 && msg == "" {
		msg = "source refused: " + transfer.FenceError(reason).Error()
	}
	return errcode.Source.Error(status, reason, msg)
}

// unavailable wraps a failure to ask addr at all.
func sourceUnavailable(addr string, err error) error {
	return fmt.Errorf("%w: source %s: %v", transfer.ErrUnavailable, addr, err)
}

func (s transferSource) client(addr string) (nodepb.NodeClient, error) {
	c, err := s.p.pool.Client(addr)
	if err != nil {
		return nil, sourceUnavailable(addr, err)
	}
	return c, nil
}

// decodeListing reads a listing_json reply body and stamps its arrival on this node's clock.
func decodeListing(addr string, body []byte) (transfer.Listing, error) {
	var l transfer.Listing
	if err := json.Unmarshal(body, &l); err != nil {
		return transfer.Listing{}, fmt.Errorf("%w: undecodable listing from %s: %v", transfer.ErrUnavailable, addr, err)
	}
	l.ReceivedAt = time.Now()
	return l, nil
}

// List implements transfer.Source (op 22).
func (s transferSource) List(ctx context.Context, addr, topic string, partition int) (transfer.Listing, error) {
	c, err := s.client(addr)
	if err != nil {
		return transfer.Listing{}, err
	}
	rep, err := c.ListPartitionSegments(ctx, &nodepb.ListPartitionSegmentsRequest{Topic: topic, Partition: int32(partition)})
	if err != nil {
		return transfer.Listing{}, sourceUnavailable(addr, err)
	}
	if err := sourceError(rep.Status, rep.Reason, rep.Error); err != nil {
		return transfer.Listing{}, err
	}
	return decodeListing(addr, rep.ListingJson)
}

// Fetch implements transfer.Source (op 23).
func (s transferSource) Fetch(ctx context.Context, addr, topic string, partition int, base, at int64, n int) ([]byte, error) {
	if n <= 0 || n > transfer.ChunkBytes {
		n = transfer.ChunkBytes
	}
	c, err := s.client(addr)
	if err != nil {
		return nil, err
	}
	rep, err := c.FetchSegmentChunk(ctx, &nodepb.FetchSegmentChunkRequest{Topic: topic, Partition: int32(partition),
		Base: base, At: at, Len: int32(n)})
	if err != nil {
		return nil, sourceUnavailable(addr, err)
	}
	if err := sourceError(rep.Status, rep.Reason, rep.Error); err != nil {
		return nil, err
	}
	if len(rep.Data) > n {
		return nil, fmt.Errorf("%w: source %s sent %d bytes for a %d-byte chunk", transfer.ErrUnavailable, addr, len(rep.Data), n)
	}
	return rep.Data, nil
}

// Stream implements transfer.Source (op 23 streamed): over a raw segment stream, each chunk
// read straight into the caller's buffer (docs/internals/node-rpc.md §1.2); when that cannot
// be opened (a source of an older release closes it at its first byte), over the gRPC stream
// with the segment codec, each chunk copied once from the transport's buffers.
func (s transferSource) Stream(ctx context.Context, addr, topic string, partition int, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	if chunk <= 0 || chunk > transfer.ChunkBytes {
		chunk = transfer.ChunkBytes
	}
	if !s.p.grpcSegments {
		raw, err := s.p.pool.OpenSegmentStream(ctx, addr, rpc.SegmentRequest{Topic: topic,
			Partition: int32(partition), Base: base, At: at, Len: n, Chunk: int32(chunk)})
		if err == nil {
			return &rawSegmentStream{addr: addr, st: raw, chunk: chunk}, nil
		}
		if !errors.Is(err, rpc.ErrSegmentStreamHandshake) {
			return nil, sourceUnavailable(addr, err)
		}
	}
	c, err := s.client(addr)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := c.StreamSegment(sctx, &nodepb.StreamSegmentRequest{Topic: topic, Partition: int32(partition),
		Base: base, At: at, Len: n, Chunk: int32(chunk)}, rpc.WithSegmentCodec())
	if err != nil {
		cancel()
		return nil, streamError(addr, err)
	}
	return &segmentStream{addr: addr, st: st, cancel: cancel, chunk: chunk}, nil
}

// segmentStream is the receiving end of one StreamSegment call.
type segmentStream struct {
	addr   string
	st     grpc.ClientStream
	cancel context.CancelFunc
	chunk  int
}

func (s *segmentStream) Recv(buf []byte) (int, error) {
	if len(buf) < s.chunk {
		return 0, fmt.Errorf("segment stream: a %d-byte buffer for chunks of up to %d", len(buf), s.chunk)
	}
	m := rpc.SegmentChunk{Into: buf[:s.chunk]}
	if err := s.st.RecvMsg(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		return 0, streamError(s.addr, err)
	}
	if err := sourceError(m.Status, "", m.Error); err != nil {
		return 0, err
	}
	return m.N, nil
}

func (s *segmentStream) Close() { s.cancel() }

// rawSegmentStream is the receiving end of a raw segment stream.
type rawSegmentStream struct {
	addr  string
	st    *rpc.SegmentStream
	chunk int
}

func (s *rawSegmentStream) Recv(buf []byte) (int, error) {
	if len(buf) < s.chunk {
		return 0, fmt.Errorf("segment stream: a %d-byte buffer for chunks of up to %d", len(buf), s.chunk)
	}
	n, err := s.st.Next(buf[:s.chunk])
	var refused *rpc.SegmentRefusal
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return n, err
	case errors.As(err, &refused):
		return 0, sourceError(refused.Status, refused.Reason, refused.Msg)
	}
	return 0, sourceUnavailable(s.addr, err)
}

func (s *rawSegmentStream) Close() { s.st.Close() }

// streamError maps a transport error of the segment stream: Unimplemented is an older source.
func streamError(addr string, err error) error {
	if errcode.TransportStatus(err) == 400 {
		return fmt.Errorf("%w: source %s: %w", transfer.ErrStreamUnsupported, addr, ErrPeerTooOld)
	}
	return sourceUnavailable(addr, err)
}

// Prepare implements transfer.Source (op 24), with a deadline of 5 s plus the lease drain.
func (s transferSource) Prepare(ctx context.Context, addr, topic string, partition int, req transfer.PrepareRequest) (transfer.Listing, error) {
	c, err := s.client(addr)
	if err != nil {
		return transfer.Listing{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, prepareCallTimeout)
	defer cancel()
	rep, err := c.PrepareHandoff(cctx, &nodepb.PrepareHandoffRequest{Topic: topic, Partition: int32(partition),
		TtlMs: req.TTL.Milliseconds(), Token: req.Token, Fence: req.Fence, ExpectHwm: req.ExpectHWM})
	if err != nil {
		return transfer.Listing{}, sourceUnavailable(addr, err)
	}
	if err := sourceError(rep.Status, rep.Reason, rep.Error); err != nil {
		return transfer.Listing{}, err
	}
	return decodeListing(addr, rep.ListingJson)
}

// DecommissionMember asks the leader at leaderAddr to perform c (op 25). The reply's status
// is returned as is (a 421 means leadership moved); err is set only when the leader could not
// be asked or answered undecodably, wrapping meta.ErrNoLeader (and ErrPeerTooOld for a leader
// without op 25).
func (p Peers) DecommissionMember(ctx context.Context, leaderAddr string, c DecomCall) (DecomResult, error) {
	cl, err := p.pool.Client(leaderAddr)
	if err != nil {
		return DecomResult{}, fmt.Errorf("%w: leader %s: %v", meta.ErrNoLeader, leaderAddr, err)
	}
	req := &nodepb.DecommissionMemberRequest{Id: c.ID, Cancel: c.Cancel, DryRun: c.DryRun,
		BlockedOnly: c.BlockedOnly, Force: c.Force}
	if len(c.Lose) > 0 {
		req.LoseJson, _ = json.Marshal(c.Lose) // plain fields: cannot fail
	}
	rep, err := cl.DecommissionMember(ctx, req)
	if err != nil {
		if errcode.TransportStatus(err) == 400 {
			return DecomResult{}, fmt.Errorf("%w: %w: leader %s: %v", meta.ErrNoLeader, ErrPeerTooOld, leaderAddr, err)
		}
		return DecomResult{}, fmt.Errorf("%w: leader %s: %v", meta.ErrNoLeader, leaderAddr, err)
	}
	out := DecomResult{Status: rep.Status, Error: rep.Error}
	if len(rep.VerdictJson) > 0 {
		if err := json.Unmarshal(rep.VerdictJson, &out.Verdict); err != nil {
			return DecomResult{}, fmt.Errorf("%w: undecodable verdict from %s: %v", meta.ErrNoLeader, leaderAddr, err)
		}
	}
	if len(rep.BlockedJson) > 0 {
		if err := json.Unmarshal(rep.BlockedJson, &out.Blocked); err != nil {
			return DecomResult{}, fmt.Errorf("%w: undecodable blocked reasons from %s: %v", meta.ErrNoLeader, leaderAddr, err)
		}
	}
	if c.BlockedOnly && out.Status == 200 && out.Blocked == nil {
		out.Blocked = map[string][]string{}
	}
	return out, nil
}

// MoveReport asks a move's destination at addr for its report (op 30): errcode.ErrNotFound when
// it runs no worker for the move, errcode.ErrUnavailable when it could not be asked.
func (p Peers) MoveReport(ctx context.Context, addr, topic string, partition int) (transfer.Report, error) {
	c, err := p.client(addr)
	if err != nil {
		return transfer.Report{}, err
	}
	rep, err := c.MoveReport(ctx, &nodepb.MoveReportRequest{Topic: topic, Partition: int32(partition)})
	if err != nil {
		return transfer.Report{}, transportError(addr, err)
	}
	if err := dataError(rep.Status, rep.Reason, rep.Error); err != nil {
		return transfer.Report{}, err
	}
	var r transfer.Report
	if err := json.Unmarshal(rep.ReportJson, &r); err != nil {
		return transfer.Report{}, fmt.Errorf("%w: undecodable report from %s: %v", errcode.ErrUnavailable, addr, err)
	}
	return r, nil
}
