package source

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/partition"
	"narad.dev/broker/internal/transfer"
)

const testEpoch = "67953471cc57a32a"

// newSource is a source over a registry of its own in a temporary data directory, owning
// every partition of one topic.
func newSource(t *testing.T) (*Source, meta.Topic) {
	t.Helper()
	top := meta.Topic{Name: "cursors", Incarnation: "0123456789abcdef", Partitions: 3}
	topic := func(name string) (meta.Topic, bool) { return top, name == top.Name }
	owns := func(string, int) bool { return true }
	parts := partition.New(partition.Deps{
		Layout:     datadir.New(t.TempDir()),
		Offsets:    consume.NewCommitter(consume.CommitterOptions{}),
		Topic:      topic,
		Owns:       owns,
		RaiseFloor: func(_ string, _ int, t0 int64) int64 { return t0 },
	})
	t.Cleanup(parts.CloseAll)
	return New(Deps{Parts: parts, Topic: topic, Owns: owns}), top
}

// openDir opens (top, p) in src's registry and returns its directory.
func openDir(t *testing.T, src *Source, top meta.Topic, p int) string {
	t.Helper()
	pt, err := src.parts.Get(top, p)
	if err != nil {
		t.Fatal(err)
	}
	return pt.Dir()
}

// writeCursor writes child's cursor file at next and returns its bytes.
func writeCursor(t *testing.T, dir, child string, next int64) []byte {
	t.Helper()
	b, err := cursorfile.Encode(child, testEpoch, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cursorfile.Path(dir, child), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// listedCursor is the record a transfer listing carries for a cursor at next: version 1, the
// child named beside it.
func listedCursor(t *testing.T, next int64) []byte {
	t.Helper()
	b, err := cursorfile.EncodeV1(testEpoch, next)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// MV-20: cursor files ship CRC-verified: one caught mid-write is read again; one that never
// verifies is left out; other files in the directory are not cursors.
func TestTransferListingShipsOnlyVerifiedCursorFiles(t *testing.T) {
	src, top := newSource(t)
	dir := openDir(t, src, top, 0)
	good := writeCursor(t, dir, "good", 1)
	whole := writeCursor(t, dir, "torn", 1)
	legacy, err := cursorfile.EncodeV1(testEpoch, 3) // an older release's file of another child
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, filepath.Join(dir, "fanout-old.offset"), legacy)
	writeRaw(t, filepath.Join(dir, "fanout-good.offset"), legacy) // superseded by good's current file
	torn := bytes.Clone(whole)
	copy(torn[20:], "ffff") // a read that caught an in-place write half done
	if err := os.WriteFile(cursorfile.Path(dir, "torn"), torn, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := writeCursor(t, dir, "bad", 1)
	bad[30] ^= 0x01
	if err := os.WriteFile(cursorfile.Path(dir, "bad"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cursorfile.Path(dir, "tmp")+".tmp-123", good, 0o644); err != nil {
		t.Fatal(err)
	}
	rereads := map[string]int{}
	cursorReread = func(path string, attempt int) {
		rereads[filepath.Base(path)] = attempt
		if filepath.Base(path) == cursorfile.FileName("torn") { // the writer finishes before the re-read
			if err := os.WriteFile(path, whole, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { cursorReread = nil })

	l, err := src.TransferListing(context.Background(), top.Name, 0)
	if err != nil {
		t.Fatalf("listing: %v", err)
	}
	got := map[string][]byte{}
	for _, c := range l.Cursors {
		got[c.Child] = c.Record
	}
	if len(got) != 3 || !bytes.Equal(got["good"], listedCursor(t, 1)) || !bytes.Equal(got["torn"], listedCursor(t, 1)) ||
		!bytes.Equal(got["old"], legacy) {
		t.Fatalf("shipped cursors %v, want good, the re-read torn one and the legacy-named one", l.Cursors)
	}
	if rereads[cursorfile.FileName("torn")] != 1 || rereads[cursorfile.FileName("bad")] != cursorRereads {
		t.Fatalf("re-reads %v: want 1 for the torn file, %d for the corrupt one", rereads, cursorRereads)
	}
}

func writeRaw(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The listing of an open replicated partition carries its leader-epoch history, which a
// follower's segment pre-copy needs (docs/internals/replication.md §5); an R = 1 partition's
// has none.
func TestListingCarriesTheLeaderEpochs(t *testing.T) {
	src, top := newSource(t)
	pt, err := src.parts.Get(top, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.TransferListing(context.Background(), top.Name, 0)
	if err != nil || len(l.Epochs) != 0 {
		t.Fatalf("listing without epochs = %+v, %v", l.Epochs, err)
	}
	for _, e := range []struct {
		epoch uint64
		start int64
	}{{1, 0}, {4, 0}} {
		if err := pt.Epochs().Assign(e.epoch, e.start); err != nil {
			t.Fatal(err)
		}
	}
	l, err = src.TransferListing(context.Background(), top.Name, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []transfer.EpochEntry{{Epoch: 1, Start: 0}, {Epoch: 4, Start: 0}}
	if !slices.Equal(l.Epochs, want) {
		t.Fatalf("listed epochs %+v, want %+v", l.Epochs, want)
	}
}
