package durable

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestWriteFileAtomicReplacesContentsAndLeavesNoTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "consumer.offset")
	for _, content := range [][]byte{[]byte("first version, longer"), []byte("v2"), {}, []byte("third")} {
		if err := WriteFileAtomic(path, content); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(content) {
			t.Fatalf("read back %q (err %v), want %q", got, err, content)
		}
		if got := names(t, dir); !slices.Equal(got, []string{"consumer.offset"}) {
			t.Fatalf("dir holds %v after an atomic write, want only the target", got)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v (err %v), want 0644", fi.Mode(), err)
	}
}

func TestWriteFileAtomicConcurrentWritersLeaveOneWholeVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "marker")
	versions := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		v := string(rune('a'+i)) + "-" + string(make([]byte, 4096))
		versions[v] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := WriteFileAtomic(path, []byte(v)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := os.ReadFile(path)
	if err != nil || !versions[string(got)] {
		t.Fatalf("final contents are not one whole written version (len %d, err %v)", len(got), err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"marker"}) {
		t.Fatalf("dir holds %v, want only the target", got)
	}
}

func TestWriteFileAtomicIntoMissingDirFailsWithErrDirMissingAndCreatesNothing(t *testing.T) {
	root := t.TempDir()
	gone := filepath.Join(root, "topics", "deleted", "p00000")
	err := WriteFileAtomic(filepath.Join(gone, "consumer.offset"), []byte("x"))
	if !errors.Is(err, ErrDirMissing) {
		t.Fatalf("write into a missing dir: %v, want ErrDirMissing", err)
	}
	if got := names(t, root); len(got) != 0 {
		t.Fatalf("a failed write created %v", got)
	}

	// A dir removed after it existed (topic purge racing a late writer).
	dir := filepath.Join(root, "p00001")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "hwm"), []byte("x")); !errors.Is(err, ErrDirMissing) {
		t.Fatalf("write into a removed dir: %v, want ErrDirMissing", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the removed dir was resurrected (stat err %v)", err)
	}
}

func TestMkdirAllCreatesNestedDirsAndIsIdempotent(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c", "p00007")
	for i := 0; i < 2; i++ {
		if err := MkdirAll(dir); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			t.Fatalf("attempt %d: %s not a directory (err %v)", i, dir, err)
		}
	}
	// A trailing slash and an unclean path name the same dir.
	if err := MkdirAll(filepath.Join(root, "a", "b") + "/./c/"); err != nil {
		t.Fatal(err)
	}
	// A file in the way is an error, not silently accepted.
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(file); err == nil {
		t.Fatal("MkdirAll over a regular file succeeded")
	}
	if err := MkdirAll(filepath.Join(file, "sub")); err == nil {
		t.Fatal("MkdirAll under a regular file succeeded")
	}
}

func TestRemoveTempsRemovesOnlyTempFiles(t *testing.T) {
	dir := t.TempDir()
	keep := []string{"00000000000000000000.log", "hwm", "consumer.offset", "consumer.journal", "tmp", "notatmp-file"}
	temps := []string{"consumer.offset" + TempSuffix + "a1b2c3", "hwm" + TempSuffix + "x", ".incarnation" + TempSuffix + "0"}
	for _, n := range append(slices.Clone(keep), temps...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A subdirectory's temps are not touched (non-recursive).
	sub := filepath.Join(dir, "p00000")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	subTemp := filepath.Join(sub, "hwm"+TempSuffix+"y")
	if err := os.WriteFile(subTemp, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := RemoveTemps(dir); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(keep), "p00000")
	sort.Strings(want)
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("after RemoveTemps: %v, want %v", got, want)
	}
	if _, err := os.Stat(subTemp); err != nil {
		t.Fatalf("RemoveTemps recursed into a subdirectory: %v", err)
	}
	if err := RemoveTemps(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("RemoveTemps on a missing dir returned nil")
	}
}

func TestIsTempMatchesTheTempSuffixOnly(t *testing.T) {
	for name, want := range map[string]bool{
		"consumer.offset.tmp-ab12": true,
		"x" + TempSuffix:           true,
		"consumer.offset":          false,
		"tmp":                      false,
		"file.tmp":                 false,
		"00000000000000000000.log": false,
	} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSyncDirAndFdatasyncSucceedOnRealFiles(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir on a missing dir returned nil")
	}
	f, err := os.Create(filepath.Join(dir, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := Fdatasync(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := Fdatasync(f); err == nil {
		t.Fatal("Fdatasync on a closed file returned nil")
	}
}
