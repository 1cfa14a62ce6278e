package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// frameStarts returns the byte position of every frame in a clean segment file.
func frameStarts(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for pos := 0; pos < len(b); {
		h, err := checkFrame(b[pos:])
		if err != nil {
			t.Fatalf("frame at %d: %v", pos, err)
		}
		out = append(out, int64(pos))
		pos += int(h.size())
	}
	return out
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func flipByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	f.ReadAt(b[:], pos)
	b[0] ^= 0xFF
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// ST-2: a torn tail is truncated on the active segment and left alone on a sealed one.
func TestTornTailTruncatedOnActiveSegmentOnly(t *testing.T) {
	t.Run("active", func(t *testing.T) {
		dir := t.TempDir()
		l := openT(t, dir, Options{})
		for i := 0; i < 3; i++ {
			commitT(t, l, testEntries("a", 4, 40), int64(i))
		}
		closeT(t, l)
		seg := segPaths(t, dir)[0]
		size := fileSize(t, seg)
		half, _ := buildFrames(t, CodecNone, 12, testEntries("torn", 4, 40), 9, maxInnerBytes)
		appendBytes(t, seg, half[:len(half)/2])

		l = openT(t, dir, Options{})
		defer closeT(t, l)
		if got := fileSize(t, seg); got != size {
			t.Fatalf("active segment is %d bytes after recovery, want %d", got, size)
		}
		if l.NextOffset() != 12 || l.HighWatermark() != 12 {
			t.Fatalf("next %d hwm %d, want 12 12", l.NextOffset(), l.HighWatermark())
		}
		if first := commitT(t, l, testEntries("b", 1, 8), 5); first != 12 {
			t.Fatalf("first = %d, want 12", first)
		}
	})
	t.Run("sealed", func(t *testing.T) {
		dir := t.TempDir()
		l := openT(t, dir, Options{SegmentBytes: 512})
		a := testEntries("a", 6, 100) // > 512 bytes: rolls after the commit
		commitT(t, l, a, 1)
		commitT(t, l, testEntries("b", 2, 10), 2)
		closeT(t, l)
		paths := segPaths(t, dir)
		if len(paths) != 2 {
			t.Fatalf("%d segments, want 2", len(paths))
		}
		half, _ := buildFrames(t, CodecNone, 6, testEntries("torn", 4, 40), 9, maxInnerBytes)
		appendBytes(t, paths[0], half[:len(half)/2])
		before, _ := os.ReadFile(paths[0])

		l = openT(t, dir, Options{SegmentBytes: 512})
		defer closeT(t, l)
		after, _ := os.ReadFile(paths[0])
		if !bytes.Equal(before, after) {
			t.Fatal("recovery modified a sealed segment")
		}
		for i, e := range a {
			expectRecord(t, l, int64(i), e, 1)
		}
		if l.NextOffset() != 8 {
			t.Fatalf("next %d, want 8", l.NextOffset())
		}
	})
}

// ST-3: mid-file corruption is resynced past; the damaged frame's offsets read as corrupt and
// later frames stay readable. Covers a payload flip (CRC) and a magic flip (resync scan).
func TestMidFileCorruptionResyncsAndKeepsLaterFrames(t *testing.T) {
	cases := map[string]func(frameStart int64) int64{
		"payload byte": func(s int64) int64 { return s + frameHeaderSize + 5 },
		"magic":        func(s int64) int64 { return s },
		"stored_len":   func(s int64) int64 { return s + 21 },
	}
	for name, at := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, Options{})
			batches := [][]Entry{testEntries("f1", 3, 30), testEntries("f2", 3, 30), testEntries("f3", 3, 30)}
			for i, b := range batches {
				commitT(t, l, b, int64(i))
			}
			closeT(t, l)
			seg := segPaths(t, dir)[0]
			starts := frameStarts(t, seg)
			size := fileSize(t, seg)
			flipByte(t, seg, at(starts[1]))

			l = openT(t, dir, Options{})
			defer closeT(t, l)
			if got := fileSize(t, seg); got != size {
				t.Fatalf("mid-file corruption changed the file size %d → %d", size, got)
			}
			if l.NextOffset() != 9 || l.HighWatermark() != 9 {
				t.Fatalf("next %d hwm %d, want 9 9", l.NextOffset(), l.HighWatermark())
			}
			for i, e := range batches[0] {
				expectRecord(t, l, int64(i), e, 0)
			}
			for off := int64(3); off < 6; off++ {
				if _, err := l.Read(off); !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("Read(%d) err = %v, want ErrCorruptRecord", off, err)
				}
			}
			for i, e := range batches[2] {
				expectRecord(t, l, int64(6+i), e, 2)
			}
			recs, err := l.ReadRange(0, 100, 0)
			if err != nil || len(recs) != 3 {
				t.Fatalf("ReadRange stops before the damage: %d records, %v", len(recs), err)
			}
			if _, err := l.ReadRange(4, 100, 0); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("ReadRange from a corrupt offset: %v", err)
			}
		})
	}
}

func TestRecoveryResyncsInSealedSegmentViaLazyIndex(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{SegmentBytes: 1024})
	var all [][]Entry
	for i := 0; i < 6; i++ {
		b := testEntries("s", 2, 60)
		all = append(all, b)
		commitT(t, l, b, int64(i))
	}
	closeT(t, l)
	paths := segPaths(t, dir)
	if len(paths) < 2 {
		t.Fatalf("want a sealed segment, have %d segments", len(paths))
	}
	starts := frameStarts(t, paths[0])
	if len(starts) < 3 {
		t.Fatalf("sealed segment has %d frames", len(starts))
	}
	flipByte(t, paths[0], starts[1]) // magic of frame 2 (offsets 2,3)
	l = openT(t, dir, Options{SegmentBytes: 1024})
	defer closeT(t, l)
	for off := int64(2); off < 4; off++ {
		if _, err := l.Read(off); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("Read(%d) err = %v", off, err)
		}
	}
	expectRecord(t, l, 4, all[2][0], 2)
	expectRecord(t, l, 0, all[0][0], 0)
}

func TestRecoveryRemovesTempsAndIgnoresForeignFiles(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	commitT(t, l, testEntries("a", 2, 8), 1)
	closeT(t, l)
	for _, name := range []string{"00000000000000000000.log.tmp-abc", "hwm.tmp-1"} {
		os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644)
	}
	for _, name := range []string{"0000000000000000001.log", "00000000000000000099.log.bak", "consumer.offset", "x.log"} {
		os.WriteFile(filepath.Join(dir, name), []byte("junk that is not a frame"), 0o644)
	}
	l = openT(t, dir, Options{})
	defer closeT(t, l)
	if _, err := os.Stat(filepath.Join(dir, "hwm.tmp-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("temp file survived Open")
	}
	if n := l.Stats().Segments; n != 1 {
		t.Fatalf("%d segments, want 1 (foreign names skipped)", n)
	}
	if l.HighWatermark() != 2 {
		t.Fatalf("hwm %d", l.HighWatermark())
	}
}

func TestRecoveredHWMIsClampedToTail(t *testing.T) {
	cases := []struct {
		name    string
		content []byte
		want    int64
	}{
		{"past tail", func() []byte { b := encodeHWM(99, true); return b[:] }(), 5},
		{"below tail (hidden tail)", func() []byte { b := encodeHWM(2, false); return b[:] }(), 2},
		{"legacy 8 bytes", binary.BigEndian.AppendUint64(nil, 3), 3},
		{"empty file", nil, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, Options{})
			commitT(t, l, testEntries("a", 2, 8), 1)
			commitT(t, l, testEntries("b", 3, 8), 1)
			closeT(t, l)
			os.WriteFile(filepath.Join(dir, HWMFileName), c.content, 0o644)
			l = openT(t, dir, Options{})
			defer closeT(t, l)
			if l.HighWatermark() != c.want || l.NextOffset() != 5 {
				t.Fatalf("hwm %d next %d, want %d 5", l.HighWatermark(), l.NextOffset(), c.want)
			}
			if st := readHWMT(t, dir); st.hwm != c.want || st.clean || st.legacy {
				t.Fatalf("hwm file after open %+v, want %d not clean, 16 bytes", st, c.want)
			}
		})
	}
}

func TestOpenFailsLoudlyOnCorruptHWMFile(t *testing.T) {
	for name, content := range map[string][]byte{
		"bad crc":   func() []byte { b := encodeHWM(1, false); b[15] ^= 1; return b[:] }(),
		"odd size":  {1, 2, 3},
		"oversized": make([]byte, 17),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, HWMFileName), content, 0o644)
			if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorruptHWM) {
				t.Fatalf("Open err = %v, want ErrCorruptHWM", err)
			}
		})
	}
}

func TestOpenRejectsInvalidOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"codec":    {Codec: 7},
		"level":    {CompressionLevel: "ultra"},
		"segbytes": {SegmentBytes: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Open(t.TempDir(), o); err == nil {
				t.Fatal("Open accepted invalid options")
			}
		})
	}
}
