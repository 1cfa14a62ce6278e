package cursorfile

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// mustAnchor anchors testChild's cursor whose file is path (Path(dir, testChild)).
func mustAnchor(t *testing.T, path, epoch string, next int64) *Writer {
	t.Helper()
	w, err := Anchor(filepath.Dir(path), testChild, epoch, next)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestAnchorWritesAFixedRecordThatOpenResumes(t *testing.T) {
	path := tempCursor(t)
	w := mustAnchor(t, path, testEpoch, 19)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, mustEncode(t, testEpoch, 19)) {
		t.Fatalf("anchored file %q is not the fixed record", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, st, err := Open(context.Background(), filepath.Dir(path), testChild)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if want := (State{Child: testChild, Epoch: testEpoch, NextOffset: 19, Version: 2}); st != want || w2.State() != want {
		t.Fatalf("Open state %+v / %+v, want %+v", st, w2.State(), want)
	}
	if got := dirNames(t, filepath.Dir(path)); !slices.Equal(got, []string{FileName(testChild)}) {
		t.Fatalf("dir holds %v after anchor, want only the cursor file", got)
	}
}

func TestAdvanceRewritesOnlyTheRecordInPlaceAndSurvivesReopen(t *testing.T) {
	path := tempCursor(t)
	dir := filepath.Dir(path)
	other := filepath.Join(dir, "hwm")
	writeRaw(t, other, []byte("neighbour"))
	w := mustAnchor(t, path, testEpoch, 0)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, next := range []int64{1, 1, 4096, 98332, 1 << 40} {
		if err := w.Advance(next); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, mustEncode(t, testEpoch, next)) {
			t.Fatalf("after Advance(%d) the file is %q", next, got)
		}
		after, err := os.Stat(path)
		if err != nil || !os.SameFile(before, after) || after.Size() != RecordSize {
			t.Fatalf("Advance(%d) replaced the file or changed its size (%v, err %v)", next, after.Size(), err)
		}
	}
	if got, _ := os.ReadFile(other); string(got) != "neighbour" {
		t.Fatalf("a neighbouring file changed: %q", got)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{FileName(testChild), "hwm"}) {
		t.Fatalf("dir holds %v", got)
	}
	w.Close()
	if st := mustRead(t, path); st != (State{Child: testChild, Epoch: testEpoch, NextOffset: 1 << 40, Version: 2}) {
		t.Fatalf("reopened state %+v", st)
	}
}

func TestAdvanceNeverMovesTheDurablePositionBackwards(t *testing.T) {
	path := tempCursor(t)
	w := mustAnchor(t, path, testEpoch, 100)
	if err := w.Advance(99); !errors.Is(err, ErrBackwards) {
		t.Fatalf("Advance(99) from 100: %v, want ErrBackwards", err)
	}
	if st := mustRead(t, path); st.NextOffset != 100 {
		t.Fatalf("file moved to %d", st.NextOffset)
	}
	if err := w.Advance(101); err != nil {
		t.Fatalf("a refused Advance must not poison the writer: %v", err)
	}
}

// A file of an older record version under the current name (version 0 JSON or version 1) is
// read, and the next write makes it a fixed version 2 record advanced in place afterwards.
func TestOlderRecordIsReadAndRewrittenAsVersion2OnTheNextWrite(t *testing.T) {
	for _, old := range [][]byte{
		[]byte(`{"epoch":"67953471cc57a32a","next_offset":98332}` + "\n"),
		mustEncodeV1(t, testEpoch, 98332),
	} {
		path := tempCursor(t)
		writeRaw(t, path, old)
		w, st, err := Open(context.Background(), filepath.Dir(path), testChild)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if st.Version == 2 || st.NextOffset != 98332 || st.Child != testChild {
			t.Fatalf("Open older state %+v", st)
		}
		if err := w.Advance(98400); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, mustEncode(t, testEpoch, 98400)) {
			t.Fatalf("rewritten file %q is not the fixed record", got)
		}
		// After the rewrite the writer advances in place on the new file.
		migrated, _ := os.Stat(path)
		if err := w.Advance(98500); err != nil {
			t.Fatal(err)
		}
		again, _ := os.Stat(path)
		if !os.SameFile(migrated, again) {
			t.Fatal("the advance after the rewrite replaced the file instead of writing in place")
		}
		if st := mustRead(t, path); st != (State{Child: testChild, Epoch: testEpoch, NextOffset: 98500, Version: 2}) {
			t.Fatalf("state after the rewrite %+v", st)
		}
		if got := dirNames(t, filepath.Dir(path)); len(got) != 1 {
			t.Fatalf("dir holds %v", got)
		}
	}
}

func TestLongEpochUsesTheAtomicPathAndStillRoundTrips(t *testing.T) {
	path := tempCursor(t)
	epoch := strings.Repeat("e", 500)
	w := mustAnchor(t, path, epoch, 5)
	for _, next := range []int64{5, 6, 7000} {
		if next != 5 {
			prev, _ := os.Stat(path)
			if err := w.Advance(next); err != nil {
				t.Fatal(err)
			}
			now, _ := os.Stat(path)
			if os.SameFile(prev, now) {
				t.Fatalf("Advance(%d) of a long record wrote in place", next)
			}
		}
		got, _ := os.ReadFile(path)
		if len(got) <= RecordSize || got[len(got)-1] != '\n' || !bytes.HasPrefix(got, []byte(`{"crc":"`)) {
			t.Fatalf("long record %q is not the long form", got)
		}
		if st := mustRead(t, path); st != (State{Child: testChild, Epoch: epoch, NextOffset: next, Version: 2}) {
			t.Fatalf("long record read back as %+v", st)
		}
	}
	w.Close()
	w2, st, err := Open(context.Background(), filepath.Dir(path), testChild)
	if err != nil || st.NextOffset != 7000 {
		t.Fatalf("Open long: %+v, %v", st, err)
	}
	defer w2.Close()
	if err := w2.Advance(7001); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Dir(path)); len(got) != 1 {
		t.Fatalf("dir holds %v, want no temp files", got)
	}
}

func TestAnchorReplacesAnotherEpochsFile(t *testing.T) {
	path := tempCursor(t)
	mustAnchor(t, path, "aaaaaaaaaaaaaaaa", 500).Close()
	w := mustAnchor(t, path, testEpoch, 19)
	if err := w.Advance(20); err != nil {
		t.Fatal(err)
	}
	if st := mustRead(t, path); st != (State{Child: testChild, Epoch: testEpoch, NextOffset: 20, Version: 2}) {
		t.Fatalf("state %+v", st)
	}
}

func TestMissingFileIsErrNotExistAndNothingIsCreated(t *testing.T) {
	path := tempCursor(t)
	if _, err := Read(context.Background(), path); !errors.Is(err, ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read missing: %v, want ErrNotExist wrapping fs.ErrNotExist", err)
	}
	if _, _, err := Open(context.Background(), filepath.Dir(path), testChild); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Open missing: %v, want ErrNotExist", err)
	}
	if got := dirNames(t, filepath.Dir(path)); len(got) != 0 {
		t.Fatalf("reading a missing cursor created %v", got)
	}
}

func TestAnchorIntoAMissingPartitionDirIsErrDirMissingAndCreatesNothing(t *testing.T) {
	root := t.TempDir()
	if _, err := Anchor(filepath.Join(root, "p00000"), testChild, testEpoch, 0); !errors.Is(err, ErrDirMissing) || !errors.Is(err, durable.ErrDirMissing) {
		t.Fatalf("Anchor into a missing dir: %v, want ErrDirMissing", err)
	}
	if got := dirNames(t, root); len(got) != 0 {
		t.Fatalf("a refused anchor created %v", got)
	}
}

func TestAdvanceAfterCloseIsErrClosed(t *testing.T) {
	w := mustAnchor(t, tempCursor(t), testEpoch, 0)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Advance(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Advance after Close: %v, want ErrClosed", err)
	}
}

func TestRemoveDeletesTheFileAndIsIdempotent(t *testing.T) {
	path := tempCursor(t)
	mustAnchor(t, path, testEpoch, 3).Close()
	for i := 0; i < 2; i++ {
		if err := Remove(path); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("file still there after Remove (%v)", err)
		}
	}
	if err := Remove(Path(filepath.Join(t.TempDir(), "gone"), "x")); err != nil {
		t.Fatalf("Remove in a missing dir: %v", err)
	}
}

// Simulated crash before the write: the injected error stands in for the process dying at
// fanout.cursor.before_advance, so the file must still hold the old offset.
func TestCrashBeforeAdvanceKeepsTheOldOffset(t *testing.T) {
	t.Cleanup(faults.Reset)
	path := tempCursor(t)
	w := mustAnchor(t, path, testEpoch, 10)
	faults.Set(FaultBeforeAdvance, nil)
	if err := w.Advance(20); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("Advance with %s armed: %v", FaultBeforeAdvance, err)
	}
	if st := mustRead(t, path); st.NextOffset != 10 {
		t.Fatalf("file holds %d after a crash before the advance, want 10", st.NextOffset)
	}
	if w.State().NextOffset != 10 {
		t.Fatalf("writer state moved to %d", w.State().NextOffset)
	}
	faults.Reset()
	if err := w.Advance(20); err != nil {
		t.Fatalf("retry after the fault: %v", err)
	}
	if st := mustRead(t, path); st.NextOffset != 20 {
		t.Fatalf("file holds %d, want 20", st.NextOffset)
	}
}

func TestCrashAfterAdvanceFindsTheNewOffsetDurable(t *testing.T) {
	t.Cleanup(faults.Reset)
	path := tempCursor(t)
	w := mustAnchor(t, path, testEpoch, 10)
	faults.Set(FaultAfterAdvance, nil)
	if err := w.Advance(20); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("Advance with %s armed: %v", FaultAfterAdvance, err)
	}
	if st := mustRead(t, path); st.NextOffset != 20 {
		t.Fatalf("file holds %d after a crash after the advance, want 20", st.NextOffset)
	}
}
