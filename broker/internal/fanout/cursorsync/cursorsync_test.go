package cursorsync

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"narad.dev/broker/internal/fanout/cursorfile"
)

const epochA = "67953471cc57a32a"

func partitionDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "p00000")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func anchor(t *testing.T, dir, child, epoch string, next int64) {
	t.Helper()
	w, err := cursorfile.Anchor(dir, child, epoch, next)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
}

func TestEnvelopeRoundTrip(t *testing.T) {
	cs := []Cursor{{Child: "a", Epoch: epochA, NextOffset: 0}, {Child: "b", Epoch: "e", NextOffset: 1 << 40},
		{Child: "remote:x@h:1", Epoch: epochA, NextOffset: 7}}
	b, err := Encode(cs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil || !slices.Equal(got, cs) {
		t.Fatalf("Decode = %v, %v; want %v", got, err, cs)
	}
	empty, err := Encode(nil)
	if err != nil || !bytes.Equal(empty, []byte{Version, 0}) {
		t.Fatalf("Encode(nil) = %v, %v", empty, err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	for name, cs := range map[string][]Cursor{
		"unsorted":  {{Child: "b", Epoch: "e"}, {Child: "a", Epoch: "e"}},
		"duplicate": {{Child: "a", Epoch: "e"}, {Child: "a", Epoch: "e"}},
		"slash":     {{Child: "a/b", Epoch: "e"}},
		"empty":     {{Child: "", Epoch: "e"}},
		"negative":  {{Child: "a", Epoch: "e", NextOffset: -1}},
		"quote":     {{Child: "a", Epoch: `e"`}},
	} {
		if _, err := Encode(cs); err == nil {
			t.Errorf("%s: Encode accepted %v", name, cs)
		}
	}
	many := make([]Cursor, MaxCursors+1)
	for i := range many {
		many[i] = Cursor{Child: strings.Repeat("c", i+1), Epoch: "e"}
	}
	if _, err := Encode(many); err == nil {
		t.Error("Encode accepted more than MaxCursors")
	}
}

func TestDecodeRefuses(t *testing.T) {
	good, _ := Encode([]Cursor{{Child: "a", Epoch: "e", NextOffset: 3}})
	huge := binary.AppendUvarint([]byte{Version}, MaxCursors+1)
	longChild := binary.AppendUvarint(binary.AppendUvarint([]byte{Version}, 1), cursorfile.MaxChildLen+1)
	for name, b := range map[string][]byte{
		"empty":       {},
		"version":     append([]byte{2}, good[1:]...),
		"trailing":    append(bytes.Clone(good), 0),
		"truncated":   good[:len(good)-1],
		"count":       huge,
		"long child":  append(longChild, bytes.Repeat([]byte{'a'}, cursorfile.MaxChildLen+1)...),
		"offset >int": append(bytes.Clone(good[:len(good)-1]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode(%x) = %v, want ErrMalformed", name, b, err)
		}
	}
}

// FuzzDecode: Decode never panics, refuses only with ErrMalformed, and whatever it accepts
// re-encodes to exactly the same bytes.
func FuzzDecode(f *testing.F) {
	good, _ := Encode([]Cursor{{Child: "a", Epoch: epochA, NextOffset: 3}, {Child: "b", Epoch: "x", NextOffset: 0}})
	f.Add(good)
	f.Add([]byte{Version, 0})
	f.Add([]byte{})
	f.Add([]byte{Version, 1, 1, 'a', 1, 'e', 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := Encode(cs)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encode of %v: %x, %v; want %x", cs, again, err, b)
		}
	})
}

func TestSnapshotApply(t *testing.T) {
	ctx := context.Background()
	leader, follower := partitionDir(t), partitionDir(t)
	anchor(t, leader, "child-a", epochA, 40)
	anchor(t, leader, "child-b", epochA, 12)
	anchor(t, follower, "child-b", epochA, 99) // ahead of the leader: the leader's wins
	anchor(t, follower, "gone", epochA, 5)     // a link the leader no longer has
	anchor(t, follower, "child-c", epochA, 7)  // behind the leader: advanced in place
	anchor(t, leader, "child-c", epochA, 9)
	before, err := os.Stat(cursorfile.Path(follower, "child-c"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leader, "00000000000000000000.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Snapshot(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, follower, b); err != nil {
		t.Fatal(err)
	}
	files, err := cursorfile.List(ctx, follower)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, f := range files {
		if f.Err != nil {
			t.Fatal(f.Err)
		}
		got[f.Child] = f.State.NextOffset
	}
	if len(got) != 3 || got["child-a"] != 40 || got["child-b"] != 12 || got["child-c"] != 9 {
		t.Fatalf("follower cursors %v, want child-a 40, child-b 12, child-c 9", got)
	}
	if after, err := os.Stat(cursorfile.Path(follower, "child-c")); err != nil || !os.SameFile(before, after) {
		t.Errorf("a cursor behind the leader's was replaced, not advanced in place (%v)", err)
	}
	// The follower's file is one a runner opens and resumes from.
	w, st, err := cursorfile.Open(ctx, follower, "child-a")
	if err != nil || st.Epoch != epochA || st.NextOffset != 40 {
		t.Fatalf("Open = %+v, %v", st, err)
	}
	w.Close()

	// An unchanged cursor is not rewritten.
	fi, _ := os.Stat(cursorfile.Path(follower, "child-a"))
	if err := Apply(ctx, follower, b); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(cursorfile.Path(follower, "child-a"))
	if !os.SameFile(fi, fi2) {
		t.Error("an unchanged cursor file was replaced")
	}

	// The leader's last link dissolved: an empty snapshot empties the follower.
	empty, _ := Encode(nil)
	if err := Apply(ctx, follower, empty); err != nil {
		t.Fatal(err)
	}
	if files, _ := cursorfile.List(ctx, follower); len(files) != 0 {
		t.Fatalf("follower kept %v", files)
	}
}

func TestSnapshotSkipsCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := partitionDir(t)
	anchor(t, dir, "ok", epochA, 1)
	if err := os.WriteFile(cursorfile.Path(dir, "bad"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Snapshot(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Decode(b)
	if err != nil || len(cs) != 1 || cs[0].Child != "ok" {
		t.Fatalf("snapshot %v, %v", cs, err)
	}
}

func TestApplyRefusesMalformed(t *testing.T) {
	dir := partitionDir(t)
	anchor(t, dir, "keep", epochA, 3)
	if err := Apply(context.Background(), dir, []byte{Version, 5}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Apply = %v, want ErrMalformed", err)
	}
	if _, err := cursorfile.Read(context.Background(), cursorfile.Path(dir, "keep")); err != nil {
		t.Fatalf("a malformed snapshot touched the files: %v", err)
	}
}
