package move

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/transfer"
)

// memSource serves segments from memory; each Fetch returns a fresh slice, as a decoded
// op-23 reply does.
type memSource struct{ segs map[int64][]byte }

func (m memSource) List(context.Context, string, string, int) (transfer.Listing, error) {
	return transfer.Listing{}, nil
}

func (m memSource) Prepare(context.Context, string, string, int, transfer.PrepareRequest) (transfer.Listing, error) {
	return transfer.Listing{}, nil
}

func (m memSource) Fetch(_ context.Context, _, _ string, _ int, base, at int64, n int) ([]byte, error) {
	b := m.segs[base]
	if at >= int64(len(b)) {
		return nil, nil
	}
	return bytes.Clone(b[at:min(int64(len(b)), at+int64(n))]), nil
}

func (m memSource) Stream(ctx context.Context, addr, topic string, p int, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	return &fetchStream{ctx: ctx, at: at, left: n, chunk: chunk, fetch: func(ctx context.Context, at int64, n int) ([]byte, error) {
		return m.Fetch(ctx, addr, topic, p, base, at, n)
	}}, nil
}

// writeModes are the ways a sealed segment's chunks can reach the disk.
var writeModes = []struct {
	name   string
	behind bool
}{{"buffered", false}, {"behind", true}}

// copyWorker returns a worker whose session stages into dir and whose source is src.
func copyWorker(tb testing.TB, dir string, src transfer.Source) *worker {
	tb.Helper()
	st := newFakeStore("n2")
	st.putMember(meta.Member{ID: "n1", ClusterAddr: "127.0.0.1:1"})
	cfg := RunnerConfig{Store: st, Source: src}.withDefaults()
	return &worker{cfg: cfg, log: slog.New(slog.DiscardHandler), topic: "t", p: 0, source: "n1", sess: newSession(dir)}
}

// memSegments returns count segments of size bytes (the last one unsealed and short by an
// unaligned amount) and their listing.
func memSegments(count int, size int64) (memSource, transfer.Listing) {
	src := memSource{segs: map[int64][]byte{}}
	var l transfer.Listing
	for i := range count {
		base := int64(i) * 1_000_000
		n := size
		if i == count-1 {
			n = size/2 + 12345
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(j*31 + i)
		}
		src.segs[base] = b
		l.Segments = append(l.Segments, transfer.Segment{Base: base, Size: n, Sealed: i < count-1})
	}
	l.HighWatermark = int64(count) * 1_000_000
	return src, l
}

// TestStagedCopyIsVerbatimWithAndWithoutWriteBehind: with write-behind and without it the copy
// stages the same bytes, including a segment tail that is not block-aligned and a resume from
// an unaligned staged size.
func TestStagedCopyIsVerbatimWithAndWithoutWriteBehind(t *testing.T) {
	for _, mode := range writeModes {
		t.Run(mode.name, func(t *testing.T) {
			defer func(old bool) { behindWrites = old }(behindWrites)
			behindWrites = mode.behind
			src, l := memSegments(3, 5<<20+4096)
			dir := t.TempDir()
			w := copyWorker(t, dir, src)
			// Stage an unaligned prefix of the first segment, as an earlier short pass would.
			first := src.segs[0]
			if err := os.WriteFile(w.sess.segPath(0), first[:777], 0o644); err != nil {
				t.Fatal(err)
			}
			copied, complete, err := w.copyPass(context.Background(), l)
			if err != nil || !complete {
				t.Fatalf("copyPass: copied %d complete %v err %v", copied, complete, err)
			}
			w.sess.waitSyncs()
			for base, want := range src.segs {
				got, err := os.ReadFile(w.sess.segPath(base))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("segment %d: staged %d bytes differ from the source's %d", base, len(got), len(want))
				}
			}
			if want := int64(len(first)-777) + int64(len(src.segs[1_000_000])+len(src.segs[2_000_000])); copied != want {
				t.Fatalf("copied %d bytes, want %d", copied, want)
			}
		})
	}
}

// overSource streams past what it was asked for, as a broken source would.
type overSource struct{ memSource }

func (o overSource) Stream(ctx context.Context, addr, topic string, p int, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	return &fetchStream{ctx: ctx, at: at, left: n + 100, chunk: chunk, fetch: func(ctx context.Context, at int64, n int) ([]byte, error) {
		return bytes.Repeat([]byte{'x'}, n), nil
	}}, nil
}

// A stream that sends more than the listed segment holds fails the pass, and the staged file
// never holds more than the listing reported.
func TestAStreamLongerThanAskedIsRefused(t *testing.T) {
	src, l := memSegments(2, 3<<20)
	w := copyWorker(t, t.TempDir(), overSource{src})
	_, complete, err := w.copyPass(context.Background(), l)
	if err == nil || complete {
		t.Fatalf("copyPass: complete %v err %v; want a refusal", complete, err)
	}
	fi, err := os.Stat(w.sess.segPath(0))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > l.Segments[0].Size {
		t.Fatalf("staged %d bytes of a segment listed at %d", fi.Size(), l.Segments[0].Size)
	}
}

// BenchmarkCopyPassToDisk measures the destination half of a move's copy (the fetch pipeline,
// the staged writes and the per-segment fsync) with an in-memory source, through the page
// cache, with and without write-behind.
func BenchmarkCopyPassToDisk(b *testing.B) {
	const segs, segSize = 8, int64(64 << 20)
	src, l := memSegments(segs+1, segSize)
	var total int64
	for _, s := range l.Segments {
		total += s.Size
	}
	for _, mode := range writeModes {
		b.Run(mode.name, func(b *testing.B) {
			defer func(old bool) { behindWrites = old }(behindWrites)
			behindWrites = mode.behind
			b.SetBytes(total)
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				w := copyWorker(b, dir, src)
				b.StartTimer()
				if _, complete, err := w.copyPass(context.Background(), l); err != nil || !complete {
					b.Fatalf("copyPass: complete %v err %v", complete, err)
				}
				w.sess.waitSyncs()
				// The active segment is fsynced by seal; count it here as dd counts its own.
				f, err := os.OpenFile(w.sess.segPath(l.Segments[segs].Base), os.O_RDWR, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
