//go:build linux

package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// bulkFrames appends about 6 MiB of records of odd sizes to a new leader log and returns its
// frames in runs of at most runBytes, so the runs start at unaligned file positions.
func bulkFrames(t *testing.T, runBytes int) (runs [][]byte, leo int64) {
	t.Helper()
	leader := openReplicaLog(t, t.TempDir(), 64<<20)
	for i := range 12 {
		if _, _, err := leader.Append(testEntries(string(rune('a'+i)), 16, 32<<10+i*37), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	leo = leader.NextOffset()
	for next := int64(0); next < leo; {
		frames, n, err := leader.ReadFrames(next, runBytes)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, frames)
		next = n
	}
	return runs, leo
}

// residentPages counts the pages of the file at path, between byte positions from and to,
// that are in the page cache.
func residentPages(t *testing.T, path string, from, to int64) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, int(to), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (to+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)),
		uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatal(errno)
	}
	for i := from / page; i < to/page; i++ {
		pages++
		if vec[i]&1 != 0 {
			resident++
		}
	}
	return resident, pages
}

// AppendFramesDirect leaves the same segment bytes as AppendFrames, and the whole blocks it
// wrote never went through the page cache (where the filesystem allows direct I/O).
func TestAppendFramesDirectWritesTheSameBytesAroundThePageCache(t *testing.T) {
	runs, leo := bulkFrames(t, 3<<20)
	plainDir, directDir := t.TempDir(), t.TempDir()
	plain := openReplicaLog(t, plainDir, 64<<20)
	direct := openReplicaLog(t, directDir, 64<<20)
	for _, run := range runs {
		kept := bytes.Clone(run)
		if _, err := direct.AppendFramesDirect(run); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(run, kept) {
			t.Fatal("AppendFramesDirect wrote into the caller's frames")
		}
		if _, err := plain.AppendFrames(run); err != nil {
			t.Fatal(err)
		}
	}
	if direct.NextOffset() != leo || plain.NextOffset() != leo {
		t.Fatalf("end offsets %d (direct), %d (plain), want %d", direct.NextOffset(), plain.NextOffset(), leo)
	}
	seg, plainSeg := filepath.Join(directDir, SegmentFileName(0)), filepath.Join(plainDir, SegmentFileName(0))
	size := fileSize(t, seg)
	// Before anything reads the files: the plain appends' pages are in the page cache (written
	// back, still cached), the direct ones never were.
	probe := filepath.Join(directDir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if f := durable.OpenDirect(probe); f == nil {
		t.Logf("no direct I/O on %s: AppendFramesDirect wrote through the page cache", directDir)
	} else {
		f.Close()
		if r, n := residentPages(t, seg, 1<<20, size-(1<<20)); r > n/10 {
			t.Fatalf("%d of %d pages of the direct segment are in the page cache", r, n)
		}
		if r, n := residentPages(t, plainSeg, 1<<20, size-(1<<20)); r < n/2 {
			t.Fatalf("only %d of %d pages of the plain segment are in the page cache: the probe cannot tell", r, n)
		}
	}
	got, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(plainSeg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the direct segment (%d bytes) differs from the plain one (%d bytes)", len(got), len(want))
	}
}

// A direct append whose verify fails is rolled back like any other: nothing of it stays, and
// the same frames append afterwards.
func TestAFailedDirectAppendIsRolledBack(t *testing.T) {
	runs, _ := bulkFrames(t, 3<<20)
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 64<<20)
	if _, err := l.AppendFramesDirect(runs[0]); err != nil {
		t.Fatal(err)
	}
	end, size := l.NextOffset(), fileSize(t, filepath.Join(dir, SegmentFileName(0)))
	armFault(t, FaultVerify, errors.New("injected"))
	if _, err := l.AppendFramesDirect(runs[1]); !errors.Is(err, ErrVerify) {
		t.Fatalf("append with a failing verify: %v", err)
	}
	if l.NextOffset() != end || fileSize(t, filepath.Join(dir, SegmentFileName(0))) != size {
		t.Fatalf("after the failed append: end %d (want %d), file %d bytes (want %d)", l.NextOffset(), end,
			fileSize(t, filepath.Join(dir, SegmentFileName(0))), size)
	}
	faults.Clear(FaultVerify)
	for _, run := range runs[1:] {
		if _, err := l.AppendFramesDirect(run); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	again := openReplicaLog(t, dir, 64<<20)
	if again.NextOffset() != 12*16 {
		t.Fatalf("reopened at %d, want %d", again.NextOffset(), 12*16)
	}
}
