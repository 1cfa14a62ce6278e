package log

import (
	"testing"
)

// BenchmarkCommit measures one commit of 100 × 1 KiB records (one segment fsync + one hwm
// fdatasync per op).
func BenchmarkCommit(b *testing.B) {
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Codec: codec})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			es := testEntries("bench", 100, 1024)
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Commit(es, int64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadSequential reads consecutive offsets of 100-record frames: each frame is
// decoded once and served from the decode cache.
func BenchmarkReadSequential(b *testing.B) {
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Codec: codec, SegmentBytes: 4 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			es := testEntries("bench", 100, 1024)
			for i := 0; i < 200; i++ { // 20,000 records, ~20 MiB, several segments
				if _, err := l.Commit(es, int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			hwm := l.HighWatermark()
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Read(int64(i) % hwm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
