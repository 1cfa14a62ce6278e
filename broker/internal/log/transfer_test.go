package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readAllCommitted reads segment base through ReadCommitted in small chunks until it returns 0.
func readAllCommitted(t *testing.T, l *Log, base int64) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 37) // odd size: chunks never line up with frames
	for at := int64(0); ; {
		n, err := l.ReadCommitted(base, at, buf)
		if err != nil {
			t.Fatalf("ReadCommitted(%d, %d): %v", base, at, err)
		}
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
		at += int64(n)
	}
}

// lastFrameEnd walks the frames of b (whole frames, CRC-checked) and returns the offset after
// the last record, or base when b is empty.
func lastFrameEnd(t *testing.T, b []byte, base int64) int64 {
	t.Helper()
	end := base
	for pos := 0; pos < len(b); {
		h, err := checkFrame(b[pos:])
		if err != nil {
			t.Fatalf("listed bytes end inside a frame at %d of %d: %v", pos, len(b), err)
		}
		end = h.end()
		pos += int(h.size())
	}
	return end
}

// makeSealedHiddenTail leaves, after a reopen, a hidden tail in the first segment and an empty
// later segment whose base is past the HWM (a roll whose commit then failed).
func makeSealedHiddenTail(t *testing.T, dir string) Options {
	t.Helper()
	opts := Options{SegmentBytes: 256}
	makeHiddenTail(t, dir, opts, testEntries("a", 2, 40), testEntries("b", 3, 40))
	l := openT(t, dir, opts)
	armFault(t, FaultVerify, nil)
	if _, err := l.Commit(testEntries("c", 1, 40), 3); err == nil {
		t.Fatal("commit with failing verify succeeded")
	}
	closeT(t, l)
	if paths := segPaths(t, dir); len(paths) != 2 {
		t.Fatalf("%d segments, want the hidden-tail segment and the empty rolled one", len(paths))
	}
	return opts
}

func TestTransferListingAndReadsNeverPassTheCommittedBoundary(t *testing.T) {
	cases := []struct {
		name      string
		make      func(t *testing.T, dir string) Options
		wantHWM   int64
		wantBases []int64
	}{
		{"hidden tail in the active segment", func(t *testing.T, dir string) Options {
			makeHiddenTail(t, dir, Options{}, testEntries("a", 3, 20), testEntries("b", 3, 20))
			return Options{}
		}, 3, []int64{0}},
		{"hidden tail that crossed a roll", func(t *testing.T, dir string) Options {
			opts := Options{SegmentBytes: 256}
			makeHiddenTail(t, dir, opts, testEntries("a", 4, 40), testEntries("b", 4, 40))
			return opts
		}, 4, []int64{0, 4}},
		{"empty segment past the hwm after a failed rolled commit", makeSealedHiddenTail, 2, []int64{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := tc.make(t, dir)
			l := openT(t, dir, opts)
			hwm, segs, err := l.CommittedListing()
			if err != nil {
				t.Fatal(err)
			}
			if hwm != tc.wantHWM || l.NextOffset() <= hwm {
				t.Fatalf("hwm %d next %d, want hwm %d below next", hwm, l.NextOffset(), tc.wantHWM)
			}
			if got := bases(segs); !slicesEqual(got, tc.wantBases) {
				t.Fatalf("listed bases %v, want %v (segments after the boundary segment omitted)", got, tc.wantBases)
			}
			end := segs[0].Base
			for i, s := range segs {
				if s.Sealed != (i < len(segs)-1) {
					t.Fatalf("segment %d sealed=%v; only segments below the boundary segment are sealed", s.Base, s.Sealed)
				}
				data := readAllCommitted(t, l, s.Base)
				if int64(len(data)) != s.Size {
					t.Fatalf("segment %d: read %d committed bytes, listed %d", s.Base, len(data), s.Size)
				}
				raw, err := os.ReadFile(filepath.Join(dir, SegmentFileName(s.Base)))
				if err != nil || !bytes.Equal(raw[:len(data)], data) {
					t.Fatalf("segment %d: committed bytes differ from the file: %v", s.Base, err)
				}
				end = lastFrameEnd(t, data, max(s.Base, end))
			}
			if end != hwm {
				t.Fatalf("listed bytes end at offset %d, want exactly the hwm %d", end, hwm)
			}
			for _, p := range segPaths(t, dir) {
				base, _ := ParseSegmentFileName(filepath.Base(p))
				if base > segs[len(segs)-1].Base {
					if n, err := l.ReadCommitted(base, 0, make([]byte, 64)); n != 0 || err != nil {
						t.Fatalf("segment %d past the boundary segment: read %d bytes, err %v", base, n, err)
					}
				}
			}
			closeT(t, l)
			chwm, csegs, exact, err := ListClosed(dir)
			if err != nil || !exact {
				t.Fatalf("ListClosed after a clean close: exact=%v err=%v", exact, err)
			}
			if chwm != hwm || !sameListing(csegs, segs) {
				t.Fatalf("ListClosed %d %+v, CommittedListing %d %+v", chwm, csegs, hwm, segs)
			}
		})
	}
}

func TestListClosedAgreesWithCommittedListingAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 2048}
	l := openT(t, dir, opts)
	for i := 0; i < 25; i++ {
		commitT(t, l, testEntries("x", 3, 50), int64(i))
	}
	hwm, segs, err := l.CommittedListing()
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Fatalf("%d segments; the test needs several rolls", len(segs))
	}
	closeT(t, l)
	for _, list := range []func(string) (int64, []SegmentInfo, bool, error){ListClosed, new(ClosedLister).List} {
		chwm, csegs, exact, err := list(dir)
		if err != nil || !exact || chwm != hwm || !sameListing(csegs, segs) {
			t.Fatalf("closed listing %d %+v exact=%v err=%v; open listing %d %+v", chwm, csegs, exact, err, hwm, segs)
		}
	}
}

func TestListClosedIsExactOnlyWithACleanHWMFile(t *testing.T) {
	cleanDir := func(t *testing.T) string {
		dir := t.TempDir()
		l := openT(t, dir, Options{})
		commitT(t, l, testEntries("a", 3, 20), 1)
		closeT(t, l)
		return dir
	}
	cases := []struct {
		name  string
		dir   func(t *testing.T) string
		exact bool
	}{
		{"clean close", cleanDir, true},
		{"crash left CLEAN=0", func(t *testing.T) string {
			dir := t.TempDir()
			makeHiddenTail(t, dir, Options{}, testEntries("a", 3, 20), testEntries("b", 1, 20))
			return dir
		}, false},
		{"legacy 8-byte hwm", func(t *testing.T) string {
			dir := cleanDir(t)
			writeFileT(t, filepath.Join(dir, HWMFileName), []byte{0, 0, 0, 0, 0, 0, 0, 3})
			return dir
		}, false},
		{"corrupt hwm", func(t *testing.T) string {
			dir := cleanDir(t)
			writeFileT(t, filepath.Join(dir, HWMFileName), []byte("garbage"))
			return dir
		}, false},
		{"no hwm file", func(t *testing.T) string {
			dir := cleanDir(t)
			if err := os.Remove(filepath.Join(dir, HWMFileName)); err != nil {
				t.Fatal(err)
			}
			return dir
		}, false},
		{"missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "p00000") }, false},
		{"clean hwm past the records", func(t *testing.T) string {
			dir := cleanDir(t)
			b := encodeHWM(9, true)
			writeFileT(t, filepath.Join(dir, HWMFileName), b[:])
			return dir
		}, false},
		{"torn boundary segment", func(t *testing.T) string {
			dir := cleanDir(t)
			seg := filepath.Join(dir, SegmentFileName(0))
			if err := os.Truncate(seg, fileSize(t, seg)-5); err != nil {
				t.Fatal(err)
			}
			return dir
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, exact, err := ListClosed(tc.dir(t))
			if err != nil || exact != tc.exact {
				t.Fatalf("exact=%v err=%v, want exact=%v", exact, err, tc.exact)
			}
		})
	}
}

func TestClosedListerMemoFollowsAReopenAndCommit(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	commitT(t, l, testEntries("a", 3, 20), 1)
	closeT(t, l)
	var c ClosedLister
	h1, s1, _, _ := c.List(dir)
	if h2, s2, exact, _ := c.List(dir); !exact || h2 != h1 || !sameListing(s1, s2) {
		t.Fatalf("memoized listing differs: %d %+v vs %d %+v", h2, s2, h1, s1)
	}
	l = openT(t, dir, Options{})
	commitT(t, l, testEntries("b", 2, 20), 2)
	want, wsegs, _ := l.CommittedListing()
	closeT(t, l)
	h3, s3, exact, err := c.List(dir)
	if err != nil || !exact || h3 != want || !sameListing(s3, wsegs) || s3[0].Size <= s1[0].Size {
		t.Fatalf("after reopen+commit: %d %+v exact=%v err=%v, want %d %+v", h3, s3, exact, err, want, wsegs)
	}
}

func TestReadCommittedRefusesUnknownSegmentsAndClosedLogs(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	commitT(t, l, testEntries("a", 3, 20), 1)
	if _, err := l.ReadCommitted(7, 0, make([]byte, 8)); !errors.Is(err, ErrNoSegment) {
		t.Fatalf("unknown base: %v, want ErrNoSegment", err)
	}
	if _, err := l.ReadCommitted(0, -1, make([]byte, 8)); err == nil {
		t.Fatal("negative position read succeeded")
	}
	closeT(t, l)
	if _, err := l.ReadCommitted(0, 0, make([]byte, 8)); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v, want ErrClosed", err)
	}
	if _, _, err := l.CommittedListing(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log listing: %v, want ErrClosed", err)
	}
}

// A listing taken while commits run always ends its bytes exactly at its own HWM.
func TestCommittedListingNeverSplitsTheHWMFromItsBytes(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{SegmentBytes: 4096})
	defer closeT(t, l)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 400; i++ {
			if _, err := l.Commit(testEntries("w", 2, 60), int64(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for checks := 0; checks < 200 && time.Now().Before(deadline); checks++ {
		hwm, segs, err := l.CommittedListing()
		if err != nil {
			t.Fatal(err)
		}
		last := segs[len(segs)-1]
		buf := make([]byte, last.Size)
		n, err := l.ReadCommitted(last.Base, 0, buf)
		if err != nil || int64(n) != last.Size {
			t.Fatalf("boundary segment %d: read %d of %d: %v", last.Base, n, last.Size, err)
		}
		if end := lastFrameEnd(t, buf, last.Base); end != hwm {
			t.Fatalf("listing hwm %d but its bytes end at offset %d", hwm, end)
		}
	}
	stop.Store(true)
	wg.Wait()
}

func FuzzListClosed(f *testing.F) {
	frames, _ := buildFrames(f, CodecNone, 0, testEntries("fz", 4, 20), 5, 64)
	f.Add(frames, int64(4))
	f.Add(frames, int64(2))
	f.Add(frames, int64(0))
	f.Add(frames[:len(frames)-3], int64(4))
	f.Add([]byte{0xCA, 0xFE, 0, 0, 0, 0, 1}, int64(1))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, seg []byte, hwm int64) {
		if hwm < 0 {
			hwm = -hwm - 1
		}
		dir := t.TempDir()
		writeFileT(t, filepath.Join(dir, SegmentFileName(0)), seg)
		b := encodeHWM(hwm, true)
		writeFileT(t, filepath.Join(dir, HWMFileName), b[:])
		got, segs, exact, err := ListClosed(dir)
		if err != nil {
			t.Fatalf("ListClosed: %v", err)
		}
		if !exact {
			return
		}
		if got != hwm || len(segs) != 1 || segs[0].Base != 0 || segs[0].Sealed {
			t.Fatalf("exact listing %d %+v for hwm %d", got, segs, hwm)
		}
		if segs[0].Size < 0 || segs[0].Size > int64(len(seg)) {
			t.Fatalf("boundary %d outside the %d-byte segment", segs[0].Size, len(seg))
		}
	})
}

func writeFileT(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func bases(segs []SegmentInfo) []int64 {
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.Base
	}
	return out
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameListing(a, b []SegmentInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Base != b[i].Base || a[i].Size != b[i].Size || a[i].Sealed != b[i].Sealed || !a[i].Mtime.Equal(b[i].Mtime) {
			return false
		}
	}
	return true
}
