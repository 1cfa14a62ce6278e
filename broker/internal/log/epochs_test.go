package log

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestEpochsAssignPersistsAndReopens(t *testing.T) {
	dir := t.TempDir()
	e, err := OpenEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Latest(); ok {
		t.Fatal("a missing file is not an empty history")
	}
	for _, a := range []EpochEntry{{1, 0}, {1, 5}, {3, 10}, {4, 10}, {7, 42}} {
		if err := e.Assign(a.Epoch, a.Start); err != nil {
			t.Fatalf("assign %+v: %v", a, err)
		}
	}
	want := []EpochEntry{{1, 0}, {3, 10}, {4, 10}, {7, 42}}
	if got := e.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	again, err := OpenEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened %v, want %v", got, want)
	}
	for _, bad := range []EpochEntry{{6, 50}, {8, 41}, {9, -1}} {
		if err := e.Assign(bad.Epoch, bad.Start); !errors.Is(err, ErrEpochOrder) {
			t.Errorf("assign %+v: %v, want ErrEpochOrder", bad, err)
		}
	}
	if got := e.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("a refused assignment changed the history: %v", got)
	}
}

func TestEpochsEndOffsetFor(t *testing.T) {
	e, err := OpenEpochs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := e.EndOffsetFor(3, 10); ok {
		t.Fatal("an empty history answered")
	}
	for _, a := range []EpochEntry{{2, 0}, {5, 100}, {9, 250}} {
		if err := e.Assign(a.Epoch, a.Start); err != nil {
			t.Fatal(err)
		}
	}
	const leo = 300
	cases := []struct {
		ask       uint64
		wantEpoch uint64
		wantEnd   int64
		ok        bool
	}{
		{1, 0, 0, false},
		{2, 2, 100, true},
		{3, 2, 100, true}, // an epoch this replica never saw: the largest below it
		{5, 5, 250, true},
		{8, 5, 250, true},
		{9, 9, leo, true},
		{12, 9, leo, true},
	}
	for _, c := range cases {
		ep, end, ok := e.EndOffsetFor(c.ask, leo)
		if ok != c.ok || (ok && (ep != c.wantEpoch || end != c.wantEnd)) {
			t.Errorf("EndOffsetFor(%d) = %d, %d, %v; want %d, %d, %v", c.ask, ep, end, ok, c.wantEpoch, c.wantEnd, c.ok)
		}
	}
}

func TestEpochsTruncate(t *testing.T) {
	dir := t.TempDir()
	e, err := OpenEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []EpochEntry{{1, 0}, {2, 10}, {3, 20}, {4, 30}} {
		if err := e.Assign(a.Epoch, a.Start); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.TruncateFrom(20); err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{1, 0}, {2, 10}}; !reflect.DeepEqual(e.Entries(), want) {
		t.Fatalf("after TruncateFrom(20): %v", e.Entries())
	}
	if err := e.TruncateBefore(15); err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{2, 15}}; !reflect.DeepEqual(e.Entries(), want) {
		t.Fatalf("after TruncateBefore(15): %v", e.Entries())
	}
	again, err := OpenEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []EpochEntry{{2, 15}}; !reflect.DeepEqual(again.Entries(), want) {
		t.Fatalf("reopened: %v", again.Entries())
	}
	if err := e.Assign(3, 15); err != nil {
		t.Fatalf("a new epoch at the start of an emptied one: %v", err)
	}
}

func TestEpochFileCorruptionIsDetected(t *testing.T) {
	good := EncodeEpochs([]EpochEntry{{1, 0}, {2, 7}})
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x40
		return b
	}
	cases := map[string][]byte{
		"empty":           nil,
		"short":           good[:10],
		"magic":           flip(0),
		"version":         flip(4),
		"count":           flip(11),
		"entry":           flip(20),
		"checksum":        flip(len(good) - 1),
		"trailing bytes":  append(append([]byte(nil), good...), 0),
		"out of order":    EncodeEpochs([]EpochEntry{{2, 0}, {1, 7}}),
		"start goes back": EncodeEpochs([]EpochEntry{{1, 9}, {2, 7}}),
		"negative start":  EncodeEpochs([]EpochEntry{{1, -1}}),
	}
	for name, b := range cases {
		if _, err := DecodeEpochs(b); !errors.Is(err, ErrEpochFileCorrupt) {
			t.Errorf("%s: %v, want ErrEpochFileCorrupt", name, err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, EpochFileName), flip(20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEpochs(dir); !errors.Is(err, ErrEpochFileCorrupt) {
		t.Fatalf("open of a corrupt file: %v", err)
	}
}

// Whatever DecodeEpochs accepts re-encodes to the same bytes; nothing panics.
func FuzzDecodeEpochs(f *testing.F) {
	f.Add(EncodeEpochs(nil))
	f.Add(EncodeEpochs([]EpochEntry{{1, 0}, {2, 7}, {9, 7}}))
	f.Add([]byte("NLEP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeEpochs(b)
		if err != nil {
			return
		}
		if got := EncodeEpochs(entries); string(got) != string(b) {
			t.Fatalf("re-encoding %v gave different bytes", entries)
		}
	})
}
