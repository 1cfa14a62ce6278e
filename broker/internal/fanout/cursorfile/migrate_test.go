package cursorfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/faults"
)

// legacyFile writes child's file in the layout before record version 2.
func legacyFile(t *testing.T, dir, child string, rec []byte) string {
	t.Helper()
	p, ok := legacyPath(dir, child)
	if !ok {
		t.Fatalf("no legacy name for %q", child)
	}
	writeRaw(t, p, rec)
	return p
}

func partitionDir(t *testing.T) string {
	t.Helper()
	return filepath.Dir(tempCursor(t))
}

// The children that broke the old layout: a name with the temp-file pattern in it (its file
// was deleted by every log open) and the longest legal topic name (its file name was too
// long). Under the current layout their files survive the log open's temp cleanup.
func TestCursorFilesOfAnyLegalChildNameSurviveTheLogOpenCleanup(t *testing.T) {
	for _, child := range []string{"audit.tmp-2024", strings.Repeat("c", 255), "remote:a.tmp-b@host:7942"} {
		dir := partitionDir(t)
		w, err := Anchor(dir, child, testEpoch, 7)
		if err != nil {
			t.Fatalf("%.20q: %v", child, err)
		}
		if err := w.Advance(9); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if err := durable.RemoveTemps(dir); err != nil {
			t.Fatal(err)
		}
		w, st, err := Open(context.Background(), dir, child)
		if err != nil {
			t.Fatalf("%.20q after the temp cleanup: %v", child, err)
		}
		w.Close()
		if st.NextOffset != 9 || st.Child != child {
			t.Fatalf("%.20q: state %+v", child, st)
		}
	}
}

// Migration: a legacy-named file (any older record version) is rewritten under the current
// name with its position and removed; nothing else is left in the directory.
func TestOpenMigratesALegacyNamedFileAndRemovesIt(t *testing.T) {
	for _, rec := range [][]byte{
		mustEncodeV1(t, testEpoch, 98332),
		[]byte(`{"epoch":"67953471cc57a32a","next_offset":98332}`),
	} {
		dir := partitionDir(t)
		old := legacyFile(t, dir, testChild, rec)
		w, st, err := Open(context.Background(), dir, testChild)
		if err != nil {
			t.Fatal(err)
		}
		if st != (State{Child: testChild, Epoch: testEpoch, NextOffset: 98332, Version: 2}) {
			t.Fatalf("migrated state %+v", st)
		}
		if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("legacy file still there (%v)", err)
		}
		if got := dirNames(t, dir); !slices.Equal(got, []string{FileName(testChild)}) {
			t.Fatalf("dir holds %v", got)
		}
		// The migrated file is a fixed version 2 record: the writer advances it in place.
		before, _ := os.Stat(Path(dir, testChild))
		if err := w.Advance(98333); err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(Path(dir, testChild))
		if !os.SameFile(before, after) {
			t.Fatal("the first advance after migration replaced the file")
		}
		w.Close()
	}
}

// A crash between writing the current file and removing the legacy one leaves both. The next
// Open resumes from the current file (which may have advanced past the legacy one by then) and
// removes the legacy file; List meanwhile marks it superseded.
func TestCrashDuringMigrationResumesFromTheCurrentFile(t *testing.T) {
	t.Cleanup(faults.Reset)
	dir := partitionDir(t)
	old := legacyFile(t, dir, testChild, mustEncodeV1(t, testEpoch, 100))
	faults.Set(FaultAfterMigrate, nil)
	if _, _, err := Open(context.Background(), dir, testChild); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("Open with %s armed: %v", FaultAfterMigrate, err)
	}
	faults.Reset()
	if st := mustRead(t, Path(dir, testChild)); st.NextOffset != 100 || st.Version != 2 {
		t.Fatalf("current file after the crash: %+v", st)
	}
	if st := mustRead(t, old); st.NextOffset != 100 {
		t.Fatalf("legacy file after the crash: %+v", st)
	}
	// The position moved on in the current file before the next start.
	if err := os.WriteFile(Path(dir, testChild), mustEncode(t, testEpoch, 250), 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := List(context.Background(), dir)
	if err != nil || len(found) != 2 || found[0].Legacy || found[0].State.NextOffset != 250 ||
		!found[1].Legacy || !found[1].Superseded || found[1].Child != testChild {
		t.Fatalf("List = %+v, %v; want the current file and the superseded legacy one", found, err)
	}
	w, st, err := Open(context.Background(), dir, testChild)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if st.NextOffset != 250 {
		t.Fatalf("resumed at %d, want the current file's 250", st.NextOffset)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{FileName(testChild)}) {
		t.Fatalf("dir holds %v, want only the current file", got)
	}
}

// A crash while the current file is being written leaves at most a temp file (removed by the
// log open) and the legacy file whole: the next Open migrates again.
func TestCrashBeforeTheMigratedFileIsRenamedMigratesAgain(t *testing.T) {
	dir := partitionDir(t)
	legacyFile(t, dir, testChild, mustEncodeV1(t, testEpoch, 100))
	writeRaw(t, Path(dir, testChild)+durable.TempSuffix+"0a1b2c", mustEncode(t, testEpoch, 100)[:40])
	if err := durable.RemoveTemps(dir); err != nil {
		t.Fatal(err)
	}
	w, st, err := Open(context.Background(), dir, testChild)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if st.NextOffset != 100 {
		t.Fatalf("state %+v", st)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{FileName(testChild)}) {
		t.Fatalf("dir holds %v", got)
	}
}

// A corrupt legacy file is not migrated: Open reports ErrCorrupt and the Anchor that follows
// replaces it, legacy file included.
func TestCorruptLegacyFileIsReplacedByTheAnchor(t *testing.T) {
	dir := partitionDir(t)
	bad := mustEncodeV1(t, testEpoch, 100)
	bad[30] ^= 1
	legacyFile(t, dir, testChild, bad)
	if _, _, err := Open(context.Background(), dir, testChild); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a corrupt legacy file: %v, want ErrCorrupt", err)
	}
	w, err := Anchor(dir, testChild, testEpoch, 5)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := dirNames(t, dir); !slices.Equal(got, []string{FileName(testChild)}) {
		t.Fatalf("dir holds %v after the anchor", got)
	}
}

// A current-layout file whose record names another child (a hash collision or a copied file)
// is never resumed from: Open reports it corrupt and List does not attribute it.
func TestFileNamingAnotherChildIsCorrupt(t *testing.T) {
	dir := partitionDir(t)
	rec, err := Encode("someone-else", testEpoch, 5)
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, Path(dir, testChild), rec)
	if _, _, err := Open(context.Background(), dir, testChild); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	found, err := List(context.Background(), dir)
	if err != nil || len(found) != 1 || found[0].Child != "" || !errors.Is(found[0].Err, ErrCorrupt) {
		t.Fatalf("List = %+v, %v", found, err)
	}
}
