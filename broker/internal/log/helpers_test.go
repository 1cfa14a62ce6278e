package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"narad.dev/broker/internal/faults"
)

// Subprocess helper modes for real kill -9 tests (the test binary re-executes itself).
const (
	helperEnv    = "NARAD_LOG_TEST_HELPER"
	helperDirEnv = "NARAD_LOG_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(helperDirEnv)))
	}
	os.Exit(m.Run())
}

// runHelper runs one crash scenario; each ends in SIGKILL (exit code 3 = it did not).
func runHelper(mode, dir string) int {
	l, err := Open(dir, Options{SegmentBytes: 1 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	switch mode {
	case "hidden-tail": // armed with log.before_hwm_persist=crash@2: B dies before its hwm persist
		if _, err := l.Commit(testEntries("A", 3, 16), 1000); err != nil {
			fmt.Fprintln(os.Stderr, "commit A:", err)
			return 2
		}
		l.Commit(testEntries("B", 2, 16), 2000)
	case "visible-then-kill":
		if _, err := l.Commit(testEntries("A", 3, 16), 1000); err != nil {
			fmt.Fprintln(os.Stderr, "commit A:", err)
			return 2
		}
		if _, err := l.Read(2); err != nil {
			fmt.Fprintln(os.Stderr, "read A:", err)
			return 2
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "truncate-tail": // armed with log.truncate_tail=crash@1: dies before the cut segment is truncated
		l.Close()
		l, err = Open(dir, Options{SegmentBytes: 2048})
		if err != nil {
			fmt.Fprintln(os.Stderr, "reopen:", err)
			return 2
		}
		if _, err := l.Commit(testEntries("C", 2, 100), 1); err != nil {
			fmt.Fprintln(os.Stderr, "commit:", err)
			return 2
		}
		for i := range 20 {
			if _, _, err := l.Append(testEntries(fmt.Sprint("H", i), 1, 300), 2); err != nil {
				fmt.Fprintln(os.Stderr, "append:", err)
				return 2
			}
		}
		l.TruncateTail(5)
	case "open-then-kill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return 3
}

// runKilled runs helper mode against dir with extra env and requires death by SIGKILL.
func runKilled(t *testing.T, mode, dir string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper %s: want SIGKILL, got err=%v stderr=%s", mode, err, stderr.String())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper %s: want SIGKILL, got %v stderr=%s", mode, err, stderr.String())
	}
}

// testEntries returns n entries with payload tag-i padded to size bytes and key k-i.
func testEntries(tag string, n, size int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		p := []byte(fmt.Sprintf("%s-%d-", tag, i))
		for len(p) < size {
			p = append(p, byte('a'+i%26))
		}
		es[i] = Entry{Key: []byte(fmt.Sprintf("k-%s-%d", tag, i)), Payload: p}
	}
	return es
}

func openT(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

func closeT(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func commitT(t *testing.T, l *Log, es []Entry, ts int64) int64 {
	t.Helper()
	first, err := l.Commit(es, ts)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return first
}

// expectRecord reads off and compares it with e.
func expectRecord(t *testing.T, l *Log, off int64, e Entry, ts int64) {
	t.Helper()
	r, err := l.Read(off)
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	if r.Offset != off || !bytes.Equal(r.Key, e.Key) || !bytes.Equal(r.Payload, e.Payload) || r.CommittedAt != ts {
		t.Fatalf("Read(%d) = {%d %q %d %q}, want {%d %q %d %q}", off, r.Offset, r.Key, r.CommittedAt, r.Payload,
			off, e.Key, ts, e.Payload)
	}
}

func segPaths(t *testing.T, dir string) []string {
	t.Helper()
	infos, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.path
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func readHWMT(t *testing.T, dir string) hwmState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, HWMFileName))
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeHWM(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// armFault arms a fault point for the duration of the test.
func armFault(t *testing.T, name string, err error) {
	t.Helper()
	faults.Set(name, err)
	t.Cleanup(func() { faults.Clear(name) })
}

// countingObserver counts the commit path's disk steps.
type countingObserver struct {
	fsyncs, flushes, hwmPersists, hwmErrors atomic.Int64
}

func (c *countingObserver) ObserveFsync(time.Duration)      { c.fsyncs.Add(1) }
func (c *countingObserver) ObserveFlush(time.Duration, int) { c.flushes.Add(1) }
func (c *countingObserver) ObserveHWMPersist(_ time.Duration, err error) {
	c.hwmPersists.Add(1)
	if err != nil {
		c.hwmErrors.Add(1)
	}
}
