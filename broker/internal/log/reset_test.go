package log

import (
	"errors"
	"os"
	"testing"

	"narad.dev/broker/internal/faults"
)

// segmentFiles lists the segment bases in dir.
func segmentFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if base, ok := ParseSegmentFileName(e.Name()); ok {
			out = append(out, base)
		}
	}
	return out
}

func TestResetToEmptiesTheLogAndStartsItLater(t *testing.T) {
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 256) // several segments
	for range 4 {
		if _, _, err := l.Append(testEntries("A", 3, 64), 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.AdvanceHWM(9); err != nil {
		t.Fatal(err)
	}
	if len(segmentFiles(t, dir)) < 2 {
		t.Fatalf("segments %v; the test needs several", segmentFiles(t, dir))
	}
	if err := l.ResetTo(12); !errors.Is(err, ErrResetNotAhead) {
		t.Fatalf("ResetTo(end offset) = %v, want ErrResetNotAhead", err)
	}
	if err := l.ResetTo(500); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 500 || l.HighWatermark() != 500 || l.OldestOffset() != 500 {
		t.Fatalf("after reset: next %d hwm %d oldest %d", l.NextOffset(), l.HighWatermark(), l.OldestOffset())
	}
	if got := segmentFiles(t, dir); len(got) != 1 || got[0] != 500 {
		t.Fatalf("segments after reset %v, want [500]", got)
	}
	if _, err := l.Read(7); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	first, leo, err := l.Append(testEntries("B", 3, 16), 2000)
	if err != nil || first != 500 || leo != 503 {
		t.Fatalf("Append after reset = %d, %d, %v", first, leo, err)
	}
	if err := l.AdvanceHWM(503); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	again, err := Open(dir, Options{SegmentBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.OldestOffset() != 500 || again.NextOffset() != 503 || again.HighWatermark() != 503 {
		t.Fatalf("reopened: oldest %d next %d hwm %d", again.OldestOffset(), again.NextOffset(), again.HighWatermark())
	}
	r, err := again.Read(501)
	if err != nil || string(r.Key) != "k-B-1" {
		t.Fatalf("read 501 after reopen: %+v, %v", r, err)
	}
}

// A crash (here: a failure) after the old segments are gone and before the new one exists
// leaves a consistent empty log below the new start, which a second reset finishes.
func TestResetToInterruptedLeavesAnEmptyLogBelowStart(t *testing.T) {
	dir := t.TempDir()
	l := openReplicaLog(t, dir, 256)
	if _, _, err := l.Append(testEntries("A", 12, 64), 1000); err != nil {
		t.Fatal(err)
	}
	if err := l.AdvanceHWM(12); err != nil {
		t.Fatal(err)
	}
	faults.Set(FaultResetTo, nil)
	err := l.ResetTo(500)
	faults.Clear(FaultResetTo)
	if !errors.Is(err, ErrFailed) || !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("interrupted ResetTo = %v", err)
	}
	l.Close()

	again, err := Open(dir, Options{SegmentBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.NextOffset() != 0 || again.HighWatermark() != 0 {
		t.Fatalf("recovered: next %d hwm %d, want an empty log", again.NextOffset(), again.HighWatermark())
	}
	if err := again.ResetTo(500); err != nil {
		t.Fatal(err)
	}
	if again.NextOffset() != 500 || again.HighWatermark() != 500 {
		t.Fatalf("after the second reset: next %d hwm %d", again.NextOffset(), again.HighWatermark())
	}
}
