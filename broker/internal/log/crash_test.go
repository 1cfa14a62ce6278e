package log

import (
	"errors"
	"testing"
)

// ST-4: a commit killed (kill -9) after its segment fsync and before its HWM persist leaves a
// hidden tail: reopen keeps it hidden, the next commit appends after it and exposes both.
func TestHiddenTailStaysHiddenAfterKillUntilNextCommit(t *testing.T) {
	dir := t.TempDir()
	runKilled(t, "hidden-tail", dir, "NARAD_FAULTS="+FaultBeforeHWMPersist+"=crash@2")

	l := openT(t, dir, Options{SegmentBytes: 1 << 20})
	defer closeT(t, l)
	if l.HighWatermark() != 3 || l.NextOffset() != 5 {
		t.Fatalf("after kill: hwm %d next %d, want 3 5 (B hidden)", l.HighWatermark(), l.NextOffset())
	}
	if _, err := l.Read(3); !errors.Is(err, ErrNotVisible) {
		t.Fatalf("hidden record read: err = %v, want ErrNotVisible", err)
	}
	if st, _ := PeekDir(dir); st.HighWatermark != 3 {
		t.Fatalf("hwm file %d, want 3", st.HighWatermark)
	}
	c := testEntries("C", 2, 16)
	if first := commitT(t, l, c, 3000); first != 5 {
		t.Fatalf("C first = %d, want 5 (after the hidden tail)", first)
	}
	if l.HighWatermark() != 7 {
		t.Fatalf("hwm %d, want 7", l.HighWatermark())
	}
	b := testEntries("B", 2, 16)
	expectRecord(t, l, 3, b[0], 2000)
	expectRecord(t, l, 4, b[1], 2000)
	expectRecord(t, l, 6, c[1], 3000)
}

// ST-4b: a record once visible stays visible across kill -9 (HWM persisted before advance).
func TestVisibleRecordStaysVisibleAfterKill(t *testing.T) {
	dir := t.TempDir()
	runKilled(t, "visible-then-kill", dir)
	l := openT(t, dir, Options{})
	defer closeT(t, l)
	if l.HighWatermark() != 3 {
		t.Fatalf("hwm %d after kill, want 3", l.HighWatermark())
	}
	a := testEntries("A", 3, 16)
	for i, e := range a {
		expectRecord(t, l, int64(i), e, 1000)
	}
}

// ST-6: CLEAN is set only by Close, cleared by Open before any commit; a kill after open
// leaves the directory not exact.
func TestCleanFlagLifecycle(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	if st := readHWMT(t, dir); st.clean {
		t.Fatal("fresh open: hwm file CLEAN=1")
	}
	commitT(t, l, testEntries("a", 4, 8), 1)
	closeT(t, l)
	if st := readHWMT(t, dir); !st.clean || st.hwm != 4 {
		t.Fatalf("after Close: %+v, want hwm 4 CLEAN", st)
	}
	if ps, err := PeekDir(dir); err != nil || !ps.Exact || ps.HighWatermark != 4 {
		t.Fatalf("PeekDir after clean close: %+v %v", ps, err)
	}

	l = openT(t, dir, Options{})
	if st := readHWMT(t, dir); st.clean || st.hwm != 4 {
		t.Fatalf("open before first commit: %+v, want hwm 4 CLEAN=0", st)
	}
	if ps, _ := PeekDir(dir); ps.Exact {
		t.Fatal("PeekDir of an open (not cleanly closed) dir reports exact")
	}
	closeT(t, l)

	runKilled(t, "open-then-kill", dir)
	ps, err := PeekDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Exact {
		t.Fatalf("PeekDir after kill -9: %+v, want not exact", ps)
	}
}
