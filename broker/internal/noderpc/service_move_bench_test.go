package noderpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// fileSource is a MoveSource serving the segment files of one directory the way the engine
// serves a closed partition (open, ReadAt into a fresh buffer, close), for the op-23 benchmarks.
type fileSource struct{ dir string }

func (fileSource) TransferListing(context.Context, string, int) (transfer.Listing, error) {
	return transfer.Listing{}, nil
}

func (fileSource) PrepareHandoff(context.Context, string, int, transfer.PrepareRequest) (transfer.Listing, error) {
	return transfer.Listing{}, nil
}

func (s fileSource) ReadSegmentChunk(_ context.Context, _ string, _ int, base, at int64, buf []byte) (int, error) {
	f, err := os.Open(filepath.Join(s.dir, plog.SegmentFileName(base)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	k, err := f.ReadAt(buf, at)
	if k > 0 || errors.Is(err, io.EOF) {
		return k, nil
	}
	return 0, err
}

// benchSegments writes count segment files of size bytes into a new directory.
func benchSegments(b *testing.B, count int, size int64) string {
	b.Helper()
	dir := b.TempDir()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for i := range count {
		f, err := os.Create(filepath.Join(dir, plog.SegmentFileName(int64(i)*1_000_000)))
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; off += int64(len(chunk)) {
			if _, err := f.Write(chunk[:min(int64(len(chunk)), size-off)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// fetchSegment fetches one segment the way the destination's copy pipeline does
// (move.fetchInto): inFlight fetches outstanding, chunks taken in order; the bytes are dropped
// (BenchmarkCopyPassToDisk in internal/move measures the destination's disk side).
func fetchSegment(ctx context.Context, src transferSource, addr string, base, size int64, inFlight int) error {
	var pending []chan error
	next := int64(0)
	for {
		for len(pending) < inFlight && next < size {
			n := int(min(int64(transfer.ChunkBytes), size-next))
			ch := make(chan error, 1)
			go func(at int64) {
				b, err := src.Fetch(ctx, addr, "t", 0, base, at, n)
				if err == nil && len(b) != n {
					err = fmt.Errorf("short chunk: %d of %d bytes", len(b), n)
				}
				ch <- err
			}(next)
			pending = append(pending, ch)
			next += int64(n)
		}
		if len(pending) == 0 {
			return nil
		}
		err := <-pending[0]
		pending = pending[1:]
		if err != nil {
			return err
		}
	}
}

// serveBenchSegments serves count segment files of size bytes on a loopback cluster port and
// returns its address and a dialled transfer source.
func serveBenchSegments(b *testing.B, count int, size int64) (string, transferSource) {
	b.Helper()
	addr, p := serveLoopback(b, &Service{mv: testDeps(fileSource{dir: benchSegments(b, count, size)}, nil, nil)})
	src := transferSource{p: p}
	if _, err := src.Fetch(context.Background(), addr, "t", 0, 0, 0, 1); err != nil { // dial once
		b.Fatal(err)
	}
	return addr, src
}

// BenchmarkMoveStreamOverGRPC measures op 23's stream over gRPC on loopback, as
// BenchmarkMoveFetchOverGRPC measures its single chunks: one stream per segment, each chunk
// received into one reused buffer (the destination's copy into its aligned write buffers) and
// dropped.
func BenchmarkMoveStreamOverGRPC(b *testing.B) { benchMoveStream(b, true) }

// BenchmarkMoveStreamRaw is BenchmarkMoveStreamOverGRPC over raw segment streams
// (docs/internals/node-rpc.md §1.2), as nodes use them.
func BenchmarkMoveStreamRaw(b *testing.B) { benchMoveStream(b, false) }

func benchMoveStream(b *testing.B, grpc bool) {
	const segs, segSize = 4, int64(64 << 20)
	addr, src := serveBenchSegments(b, segs, segSize)
	src.p.grpcSegments = grpc
	ctx := context.Background()
	buf := make([]byte, transfer.ChunkBytes)
	b.SetBytes(segs * segSize)
	cpu := processCPU()
	defer func() {
		b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(int64(b.N)*segs*segSize>>20), "cpu-µs/MiB")
	}()
	for range b.N {
		for i := range segs {
			st, err := src.Stream(ctx, addr, "t", 0, int64(i)*1_000_000, 0, segSize, 0)
			if err != nil {
				b.Fatal(err)
			}
			var got int64
			for {
				n, err := st.Recv(buf)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				got += int64(n)
			}
			st.Close()
			if got != segSize {
				b.Fatalf("streamed %d of %d bytes", got, segSize)
			}
		}
	}
}

// BenchmarkMoveFetchOverGRPC measures op 23's transport on loopback: segment files read by the
// source, shipped in 1 MiB chunks over the real cluster port (mux, gRPC, proof of secret) to
// the destination's client. Sub-benchmarks vary the fetches in flight per segment and the
// segments fetched at once.
func BenchmarkMoveFetchOverGRPC(b *testing.B) {
	const segs, segSize = 4, int64(64 << 20)
	addr, src := serveBenchSegments(b, segs, segSize)
	ctx := context.Background()
	for _, c := range []struct{ inFlight, parallel int }{{8, 1}, {4, 1}, {16, 1}, {8, 2}, {4, 4}} {
		b.Run(fmt.Sprintf("inflight=%d/segments=%d", c.inFlight, c.parallel), func(b *testing.B) {
			b.SetBytes(segs * segSize)
			for range b.N {
				sem := make(chan struct{}, c.parallel)
				var wg sync.WaitGroup
				errs := make(chan error, segs)
				for i := range segs {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						if err := fetchSegment(ctx, src, addr, int64(i)*1_000_000, segSize, c.inFlight); err != nil {
							errs <- err
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMoveFetchTransportOptions compares gRPC transport settings for op 23 on a plain
// loopback gRPC server (no mux, no proof of secret, so the settings are the only difference):
// the defaults the node pool uses, larger socket buffers and flow-control windows, and the
// fetches spread over two connections. It shows what a change in internal/rpc would buy.
func BenchmarkMoveFetchTransportOptions(b *testing.B) {
	const segs, segSize = 4, int64(64 << 20)
	srcDir := benchSegments(b, segs, segSize)
	big := []grpc.ServerOption{grpc.WriteBufferSize(1 << 20), grpc.ReadBufferSize(1 << 20),
		grpc.InitialWindowSize(16 << 20), grpc.InitialConnWindowSize(64 << 20)}
	bigDial := []grpc.DialOption{grpc.WithWriteBufferSize(1 << 20), grpc.WithReadBufferSize(1 << 20),
		grpc.WithInitialWindowSize(16 << 20), grpc.WithInitialConnWindowSize(64 << 20)}
	for _, c := range []struct {
		name  string
		sopts []grpc.ServerOption
		dopts []grpc.DialOption
		conns int
	}{
		{"defaults", nil, nil, 1},
		{"buffers=1MiB,windows=16MiB", big, bigDial, 1},
		{"defaults,conns=2", nil, nil, 2},
		{"buffers=1MiB,windows=16MiB,conns=2", big, bigDial, 2},
	} {
		b.Run(c.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(32 << 20), grpc.MaxSendMsgSize(32 << 20)}, c.sopts...)
			srv := grpc.NewServer(opts...)
			nodepb.RegisterNodeServer(srv, &Service{mv: testDeps(fileSource{dir: srcDir}, nil, nil)})
			go func() { _ = srv.Serve(ln) }()
			defer srv.Stop()
			var clients []nodepb.NodeClient
			for range c.conns {
				dopts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32 << 20))}, c.dopts...)
				cc, err := grpc.NewClient(ln.Addr().String(), dopts...)
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Close()
				clients = append(clients, nodepb.NewNodeClient(cc))
			}
			ctx := context.Background()
			b.SetBytes(segs * segSize)
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				errs := make(chan error, segs)
				sem := make(chan struct{}, 8) // 8 fetches in flight in all
				for i := range segs {
					cl := clients[i%len(clients)]
					for at := int64(0); at < segSize; at += transfer.ChunkBytes {
						wg.Add(1)
						sem <- struct{}{}
						go func() {
							defer wg.Done()
							defer func() { <-sem }()
							rep, err := cl.FetchSegmentChunk(ctx, &nodepb.FetchSegmentChunkRequest{Topic: "t",
								Base: int64(i) * 1_000_000, At: at, Len: transfer.ChunkBytes})
							if err == nil && len(rep.Data) != transfer.ChunkBytes {
								err = fmt.Errorf("chunk of %d bytes", len(rep.Data))
							}
							if err != nil {
								errs <- err
							}
						}()
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
		})
	}
}
