package noderpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// bytesSource is a MoveSource holding one segment in memory: its committed boundary is
// len(data), and a read at or past failAt fails with failErr.
type bytesSource struct {
	fakeSource
	data    []byte
	failAt  int64
	failErr error
}

func (s *bytesSource) ReadSegmentChunk(_ context.Context, _ string, _ int, _, at int64, buf []byte) (int, error) {
	if s.failErr != nil && at >= s.failAt {
		return 0, s.failErr
	}
	if at >= int64(len(s.data)) {
		return 0, nil
	}
	return copy(buf, s.data[at:]), nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// drainStream reads st to its end into one slice and returns it with the chunk sizes seen.
func drainStream(t *testing.T, st transfer.SegmentStream, bufLen int) ([]byte, []int, error) {
	t.Helper()
	defer st.Close()
	var out []byte
	var sizes []int
	buf := make([]byte, bufLen)
	for {
		n, err := st.Recv(buf)
		if errors.Is(err, io.EOF) {
			return out, sizes, nil
		}
		if err != nil {
			return out, sizes, err
		}
		out = append(out, buf[:n]...)
		sizes = append(sizes, n)
	}
}

// segmentTransports are the two ways a segment stream travels: a raw segment stream
// connection, and the gRPC stream (a source of an older release, or a raw stream that could
// not be opened).
var segmentTransports = []struct {
	name string
	grpc bool
}{{"raw", false}, {"grpc", true}}

// over returns p sending segment streams over gRPC when grpc is set, else raw when it can.
func over(p Peers, grpc bool) Peers {
	p.grpcSegments = grpc
	return p
}

func TestSegmentStreamSendsTheCommittedBytesInChunks(t *testing.T) {
	for _, tr := range segmentTransports {
		t.Run(tr.name, func(t *testing.T) { testSegmentStreamSendsTheCommittedBytesInChunks(t, tr.grpc) })
	}
}

func testSegmentStreamSendsTheCommittedBytesInChunks(t *testing.T, grpc bool) {
	data := randomBytes(3*transfer.ChunkBytes + 12345)
	src := &bytesSource{data: data}
	addr, p := serveLoopback(t, &Service{mv: testDeps(src, nil, nil)})
	ts := NewTransferSource(over(p, grpc))
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		at, n     int64
		chunk     int
		want      []byte
		maxChunks int
	}{
		{"the rest of the segment", 100, int64(len(data)) - 100, transfer.ChunkBytes, data[100:], 4},
		{"stops at len", 0, transfer.ChunkBytes + 7, 0, data[:transfer.ChunkBytes+7], 2},
		{"ends early at the committed boundary", 5, 10 * transfer.ChunkBytes, transfer.ChunkBytes, data[5:], 4},
		{"small chunks", 1, 50_000, 1000, data[1:50_001], 50},
		{"nothing at the boundary", int64(len(data)), 10, 0, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for range 2 { // two streams at once share the send buffers' pool
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := ts.Stream(ctx, addr, "t", 0, 0, tc.at, tc.n, tc.chunk)
					if err != nil {
						t.Error(err)
						return
					}
					got, sizes, err := drainStream(t, st, transfer.ChunkBytes)
					if err != nil {
						t.Error(err)
						return
					}
					if !bytes.Equal(got, tc.want) {
						t.Errorf("got %d bytes, want %d (equal prefix %d)", len(got), len(tc.want), commonPrefix(got, tc.want))
					}
					if len(sizes) > tc.maxChunks {
						t.Errorf("%d chunks %v; want at most %d", len(sizes), sizes, tc.maxChunks)
					}
				}()
			}
			wg.Wait()
		})
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestSegmentStreamEndsWithTheSourcesRefusal(t *testing.T) {
	for _, tr := range segmentTransports {
		t.Run(tr.name, func(t *testing.T) { testSegmentStreamEndsWithTheSourcesRefusal(t, tr.grpc) })
	}
}

func testSegmentStreamEndsWithTheSourcesRefusal(t *testing.T, grpc bool) {
	data := randomBytes(3 * transfer.ChunkBytes)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"not owner", errcode.ErrNotOwner, transfer.ErrNotOwner},
		{"topic gone", errcode.ErrTopicGone, transfer.ErrNotFound},
		{"disk", errors.New("eio"), transfer.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &bytesSource{data: data, failAt: 2 * transfer.ChunkBytes, failErr: fmt.Errorf("wrapped: %w", tc.err)}
			addr, p := serveLoopback(t, &Service{mv: testDeps(src, nil, nil)})
			st, err := NewTransferSource(over(p, grpc)).Stream(context.Background(), addr, "t", 0, 0, 0, int64(len(data)), 0)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := drainStream(t, st, transfer.ChunkBytes)
			if !errors.Is(err, tc.want) {
				t.Fatalf("stream ended with %v, want %v", err, tc.want)
			}
			if !bytes.Equal(got, data[:2*transfer.ChunkBytes]) {
				t.Fatalf("%d bytes before the refusal; want the %d read before it", len(got), 2*transfer.ChunkBytes)
			}
		})
	}
}

func TestSegmentStreamRefusesABadRequestAndAnUnwiredNode(t *testing.T) {
	src := &bytesSource{data: randomBytes(10)}
	addr, p := serveLoopback(t, &Service{mv: testDeps(src, nil, nil)})
	bareAddr, bareP := serveLoopback(t, &Service{})
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		addr       string
		p          Peers
		topic      string
		part       int
		at, n      int64
		wantStatus int32
	}{
		{"no topic", addr, p, "", 0, 0, 1, 400},
		{"negative partition", addr, p, "t", -1, 0, 1, 400},
		{"negative position", addr, p, "t", 0, -1, 1, 400},
		{"no length", addr, p, "t", 0, 0, 0, 400},
		{"moves not wired", bareAddr, bareP, "t", 0, 0, 1, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.p.pool.Client(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.StreamSegment(ctx, &nodepb.StreamSegmentRequest{Topic: tc.topic, Partition: int32(tc.part), At: tc.at, Len: tc.n})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := st.Recv()
			if err != nil || rep.Status != tc.wantStatus || rep.Error == "" || len(rep.Data) != 0 {
				t.Fatalf("reply %+v %v; want status %d with a reason", rep, err, tc.wantStatus)
			}
			if _, err := st.Recv(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the refusal: %v, want the end of the stream", err)
			}
		})
	}
}

// A client without the segment codec gets the same bytes as protobuf replies.
func TestSegmentStreamServesTheProtobufCodecToo(t *testing.T) {
	data := randomBytes(2*transfer.ChunkBytes + 3)
	addr, p := serveLoopback(t, &Service{mv: testDeps(&bytesSource{data: data}, nil, nil)})
	c, err := p.pool.Client(addr)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.StreamSegment(context.Background(), &nodepb.StreamSegmentRequest{Topic: "t", At: 1, Len: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		rep, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || rep.Status != 200 {
			t.Fatalf("reply %d %q: %v", rep.GetStatus(), rep.GetError(), err)
		}
		got = append(got, rep.Data...)
	}
	if !bytes.Equal(got, data[1:]) {
		t.Fatalf("got %d bytes, want %d", len(got), len(data)-1)
	}
}

// olderNode serves the node RPC of a release without the segment stream.
type olderNode struct{ nodepb.UnimplementedNodeServer }

func TestSegmentStreamOfAnOlderSourceIsUnsupported(t *testing.T) {
	addr, p := serveLoopback(t, olderNode{})
	st, err := NewTransferSource(p).Stream(context.Background(), addr, "t", 0, 0, 0, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(make([]byte, transfer.ChunkBytes)); !errors.Is(err, transfer.ErrStreamUnsupported) {
		t.Fatalf("Recv: %v, want ErrStreamUnsupported", err)
	}
}

func TestSegmentStreamRecvWantsRoomForAChunk(t *testing.T) {
	for _, tr := range segmentTransports {
		t.Run(tr.name, func(t *testing.T) { testSegmentStreamRecvWantsRoomForAChunk(t, tr.grpc) })
	}
}

func testSegmentStreamRecvWantsRoomForAChunk(t *testing.T, grpc bool) {
	addr, p := serveLoopback(t, &Service{mv: testDeps(&bytesSource{data: randomBytes(100)}, nil, nil)})
	st, err := NewTransferSource(over(p, grpc)).Stream(context.Background(), addr, "t", 0, 0, 0, 100, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recv(make([]byte, 63)); err == nil {
		t.Fatal("a 63-byte buffer for 64-byte chunks was accepted")
	}
	got, _, err := drainStream(t, st, 64)
	if err != nil || len(got) != 100 {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
}

// noGRPCStream is a node that serves segments only as raw segment streams.
type noGRPCStream struct{ *Service }

func (noGRPCStream) StreamSegment(*nodepb.StreamSegmentRequest, nodepb.Node_StreamSegmentServer) error {
	return errors.New("the gRPC stream was used")
}

// A source that serves raw segment streams gets asked over one.
func TestSegmentStreamGoesRawWhenTheSourceServesIt(t *testing.T) {
	data := randomBytes(2*transfer.ChunkBytes + 5)
	addr, p := serveLoopback(t, noGRPCStream{&Service{mv: testDeps(&bytesSource{data: data}, nil, nil)}})
	st, err := NewTransferSource(p).Stream(context.Background(), addr, "t", 0, 0, 0, int64(len(data)), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := drainStream(t, st, transfer.ChunkBytes)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%d bytes of %d, %v", len(got), len(data), err)
	}
}

// The raw stream answers a bad request and an unwired node as the gRPC stream does.
func TestRawSegmentStreamRefusesABadRequestAndAnUnwiredNode(t *testing.T) {
	addr, p := serveLoopback(t, &Service{mv: testDeps(&bytesSource{data: randomBytes(10)}, nil, nil)})
	bareAddr, bareP := serveLoopback(t, &Service{})
	for _, tc := range []struct {
		name string
		addr string
		p    Peers
		req  rpc.SegmentRequest
		want int32
	}{
		{"negative partition", addr, p, rpc.SegmentRequest{Topic: "t", Partition: -1, Len: 1}, 400},
		{"negative position", addr, p, rpc.SegmentRequest{Topic: "t", At: -1, Len: 1}, 400},
		{"no length", addr, p, rpc.SegmentRequest{Topic: "t"}, 400},
		{"moves not wired", bareAddr, bareP, rpc.SegmentRequest{Topic: "t", Len: 1}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.p.pool.OpenSegmentStream(context.Background(), tc.addr, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var r *rpc.SegmentRefusal
			if _, err := st.Next(make([]byte, 16)); !errors.As(err, &r) || r.Status != tc.want || r.Msg == "" {
				t.Fatalf("%v; want status %d with a reason", err, tc.want)
			}
		})
	}
}
