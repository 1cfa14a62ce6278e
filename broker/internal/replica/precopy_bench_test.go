package replica

import (
	"bytes"
	"context"
	"testing"

	"narad.dev/broker/internal/log"
)

// BenchmarkPreCopy measures the follower's side of a segment pre-copy: the leader's sealed
// 64 MiB segments read in-process (no node RPC) into an empty follower's log, every frame
// checked, the bytes written with write-behind and each segment installed with its fsync. It
// bounds what a catch-up can reach on this disk with the transport taken out.
func BenchmarkPreCopy(b *testing.B) {
	const segBytes = 64 << 20
	dir := b.TempDir()
	l, err := log.Open(dir, log.Options{SegmentBytes: segBytes})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ep, err := log.OpenEpochs(dir)
	if err != nil {
		b.Fatal(err)
	}
	a := &node{id: "a", log: l, epochs: ep}
	if err := ep.Assign(1, 0); err != nil {
		b.Fatal(err)
	}
	ld, err := NewLeader(LeaderConfig{Self: "a", Epoch: 1, Replicas: []string{"a", "b"}, ISR: []string{"a"}, MinISR: 1, Log: l})
	if err != nil {
		b.Fatal(err)
	}
	es := make([]log.Entry, 128)
	for i := range es {
		es[i] = log.Entry{Payload: bytes.Repeat([]byte{'p'}, 8<<10)}
	}
	for l.NextOffset() < 1 || sealedBytes(b, a) < 4*segBytes {
		if _, _, err := l.Append(es, 1000); err != nil {
			b.Fatal(err)
		}
		if err := ld.Appended(); err != nil {
			b.Fatal(err)
		}
	}
	src := &segSource{n: a}
	b.SetBytes(sealedBytes(b, a))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fdir := b.TempDir()
		fl, err := log.Open(fdir, log.Options{SegmentBytes: segBytes})
		if err != nil {
			b.Fatal(err)
		}
		fe, err := log.OpenEpochs(fdir)
		if err != nil {
			b.Fatal(err)
		}
		fw := &Follower{Self: "b", Epoch: 1, Log: fl, Epochs: fe, Source: direct{n: a, ld: ld}}
		b.StartTimer()
		res, err := fw.PreCopy(context.Background(), src)
		if err != nil || res.Segments < 4 {
			b.Fatalf("PreCopy = %+v, %v", res, err)
		}
		b.StopTimer()
		fl.Close()
		b.StartTimer()
	}
}

func sealedBytes(tb testing.TB, n *node) (sum int64) {
	_, segs, err := n.log.CommittedListing()
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range segs {
		if s.Sealed {
			sum += s.Size
		}
	}
	return sum
}
