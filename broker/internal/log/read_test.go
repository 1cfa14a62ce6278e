package log

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestReadServesOnlyOldestToHWM(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer closeT(t, l)
	commitT(t, l, testEntries("a", 3, 8), 1)
	cases := []struct {
		off  int64
		want error
	}{
		{-1, ErrOffsetOutOfRange},
		{0, nil},
		{2, nil},
		{3, ErrNotVisible},
		{1 << 40, ErrNotVisible},
	}
	for _, c := range cases {
		if _, err := l.Read(c.off); !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Fatalf("Read(%d) err = %v, want %v", c.off, err, c.want)
		}
		if _, err := l.ReadRange(c.off, 10, 0); !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Fatalf("ReadRange(%d) err = %v, want %v", c.off, err, c.want)
		}
	}
}

func TestSequentialReadsDecodeAFrameOnce(t *testing.T) {
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			l := openT(t, t.TempDir(), Options{Codec: codec})
			defer closeT(t, l)
			commitT(t, l, testEntries("a", 100, 64), 1)
			first, err := l.Read(0)
			if err != nil {
				t.Fatal(err)
			}
			base := uintptr(unsafe.Pointer(unsafe.SliceData(first.Payload)))
			for off := int64(1); off < 100; off++ {
				r, err := l.Read(off)
				if err != nil {
					t.Fatal(err)
				}
				// Same decode ⇒ every payload lies in the one decoded buffer after record 0.
				p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Payload)))
				if p <= base || p-base > 100*200 {
					t.Fatalf("record %d was decoded separately from its frame", off)
				}
			}
			again, _ := l.Read(0)
			if unsafe.SliceData(again.Payload) != unsafe.SliceData(first.Payload) {
				t.Fatal("re-read of a cached frame decoded it again")
			}
		})
	}
}

func TestReadAcrossManyFramesAndSegmentsUsesIndexAndNav(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 64 << 10}
	l := openT(t, dir, opts)
	var all []Entry
	for i := 0; i < 300; i++ {
		es := testEntries("m", 3, 120)
		commitT(t, l, es, int64(i))
		all = append(all, es...)
	}
	closeT(t, l)
	l = openT(t, dir, opts)
	defer closeT(t, l)
	if l.Stats().Segments < 2 {
		t.Fatalf("want several segments, have %d", l.Stats().Segments)
	}
	// Backwards (defeats nav), then forwards, then strided: every path must agree.
	for off := int64(len(all)) - 1; off >= 0; off -= 37 {
		expectRecord(t, l, off, all[off], off/3)
	}
	for off := range all {
		expectRecord(t, l, int64(off), all[off], int64(off/3))
	}
	l.cmu.Lock()
	hot, nav, frames := len(l.hot), len(l.nav.entries), len(l.dcache.frames)
	l.cmu.Unlock()
	if hot > hotSealedIndex || nav > navCacheEntries || frames > decodeCacheFrames {
		t.Fatalf("cache bounds broken: hot %d nav %d frames %d", hot, nav, frames)
	}
}

func TestDecodeCacheStaysWithinBounds(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer closeT(t, l)
	for i := 0; i < 12; i++ {
		commitT(t, l, testEntries("big", 4, 200<<10), int64(i)) // ~800 KiB frames, 9.6 MiB total
	}
	for off := int64(0); off < l.HighWatermark(); off++ {
		if _, err := l.Read(off); err != nil {
			t.Fatal(err)
		}
	}
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.dcache.bytes > decodeCacheBytes || len(l.dcache.frames) > decodeCacheFrames {
		t.Fatalf("decode cache holds %d frames / %d bytes", len(l.dcache.frames), l.dcache.bytes)
	}
}

func TestReadRangeHonoursRecordAndByteLimits(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer closeT(t, l)
	for i := 0; i < 4; i++ {
		commitT(t, l, testEntries("r", 5, 100), int64(i)) // key 7–8 bytes + 100 payload
	}
	cases := []struct {
		name       string
		from       int64
		max, bytes int
		want       int
	}{
		{"all", 0, 0, 0, 20},
		{"record limit across frames", 3, 9, 0, 9},
		{"byte limit", 0, 0, 350, 3},
		{"first record always", 0, 0, 1, 1},
		{"stops at hwm", 18, 10, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, err := l.ReadRange(c.from, c.max, c.bytes)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != c.want {
				t.Fatalf("%d records, want %d", len(recs), c.want)
			}
			for i, r := range recs {
				if r.Offset != c.from+int64(i) {
					t.Fatalf("record %d has offset %d", i, r.Offset)
				}
			}
		})
	}
}

// ST-16: the codec is read from each frame; a log written without compression and reopened
// with zstd reads both kinds of frames.
func TestCodecIsPerFrameAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{Codec: CodecNone})
	a := testEntries("none", 10, 300)
	commitT(t, l, a, 1)
	closeT(t, l)
	l = openT(t, dir, Options{Codec: CodecZstd, CompressionLevel: LevelBetter})
	b := testEntries("zstd", 10, 300)
	commitT(t, l, b, 2)
	closeT(t, l)
	seg := segPaths(t, dir)[0]
	raw, _ := os.ReadFile(seg)
	starts := frameStarts(t, seg)
	if len(starts) != 2 || Codec(raw[2]) != CodecNone || Codec(raw[starts[1]+2]) != CodecZstd {
		t.Fatalf("frame codecs not as written: starts %v", starts)
	}
	l = openT(t, dir, Options{Codec: CodecNone})
	defer closeT(t, l)
	for i, e := range a {
		expectRecord(t, l, int64(i), e, 1)
	}
	for i, e := range b {
		expectRecord(t, l, int64(10+i), e, 2)
	}
}

// ST-17: one HWM advance wakes every parked waiter; a waiter whose snapshot raced the
// broadcast still wakes.
func TestOneCommitWakesAllWaiters(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer closeT(t, l)
	const waiters = 100
	var parked, woken sync.WaitGroup
	parked.Add(waiters)
	woken.Add(waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			defer woken.Done()
			c := l.NotifyC() // snapshot before probing
			if l.HighWatermark() > 0 {
				parked.Done()
				return
			}
			parked.Done()
			<-c
		}()
	}
	parked.Wait()
	raced := l.NotifyC() // a waiter that snapshotted but has not parked yet
	commitT(t, l, testEntries("w", 1, 8), 1)
	done := make(chan struct{})
	go func() { woken.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("not every waiter woke after one commit")
	}
	select {
	case <-raced:
	default:
		t.Fatal("a snapshot taken before the commit was not closed")
	}
	select {
	case <-l.NotifyC():
		t.Fatal("the fresh channel is already closed")
	default:
	}
}
