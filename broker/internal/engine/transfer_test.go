package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout/cursorfile"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/transfer"
	"narad.dev/broker/internal/wal"
)

const testEpoch = "67953471cc57a32a"

func fileSizeOf(t *testing.T, dir string, base int64) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, plog.SegmentFileName(base)))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func (n *testNode) listing(t meta.Topic, p int) transfer.Listing {
	n.t.Helper()
	l, err := n.e.TransferListing(n.ctx(), t.Name, p)
	if err != nil {
		n.t.Fatalf("listing %s/%d: %v", t.Name, p, err)
	}
	return l
}

// fetchAll copies every listed segment through FetchSegmentChunk in chunks of n bytes,
// continuing past each listed size to prove nothing more is served.
func (n *testNode) fetchAll(t meta.Topic, p int, l transfer.Listing, chunk int) map[int64][]byte {
	n.t.Helper()
	out := map[int64][]byte{}
	for _, s := range l.Segments {
		var got []byte
		for {
			b, err := n.e.FetchSegmentChunk(n.ctx(), t.Name, p, s.Base, int64(len(got)), chunk)
			if err != nil {
				n.t.Fatalf("fetch %d at %d: %v", s.Base, len(got), err)
			}
			if len(b) == 0 {
				break
			}
			got = append(got, b...)
		}
		out[s.Base] = got
	}
	return out
}

// closePart closes (t, p) cleanly (CLEAN hwm, consumer checkpoint), as idle eviction does.
func (n *testNode) closePart(t meta.Topic, p int) {
	n.t.Helper()
	pt := n.e.parts.Peek(t.Name, p)
	if pt == nil {
		n.t.Fatalf("%s/%d not open", t.Name, p)
	}
	n.e.parts.ClosePartition(pt)
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

// The listing carries every field of docs/internals/moves.md §4.1, the same whether the partition is
// open or closed with a CLEAN hwm; a closed one is listed without being opened.
func TestTransferListingReportsPositionsSidecarsAndSegments(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.SegmentBytes = 512 })
	top := n.createTopic(service.CreateTopicRequest{Name: "list", Partitions: 3})
	for i := 0; i < 8; i++ {
		n.mustCommit(top, 0, strings.Repeat("r", 100))
	}
	msgs := n.consume(top, pinned(0, 0, 3))
	errs := n.e.AckLocal(top, []service.AckEntry{ackEntry(t, msgs[0], service.OpAck), ackEntry(t, msgs[2], service.OpAck)})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	dir := n.partDir(top.Name, 0)
	writeCursor(t, dir, "audit", 5)
	cursor := listedCursor(t, 5)
	marker := transfer.Marker{Topic: top.Name, Incarnation: top.Incarnation, From: "n0", To: "n1", HWM: 3, Links: []transfer.Link{}}
	if err := transfer.WriteMarker(dir, marker); err != nil {
		t.Fatal(err)
	}

	before := time.Now().UnixMilli()
	open := n.listing(top, 0)
	switch {
	case open.HighWatermark != 8 || open.OldestOffset != 0 || open.Incarnation != top.Incarnation:
		t.Fatalf("hwm %d oldest %d incarnation %q", open.HighWatermark, open.OldestOffset, open.Incarnation)
	case open.CommittedOffset != 0 || !open.HasCommitted || len(open.AckedAhead) != 1 || open.AckedAhead[0] != 2:
		t.Fatalf("frontier %d ahead %v has=%v, want 0 [2] true (the in-memory shard)", open.CommittedOffset, open.AckedAhead, open.HasCommitted)
	case len(open.Cursors) != 1 || open.Cursors[0].Child != "audit" || !bytes.Equal(open.Cursors[0].Record, cursor):
		t.Fatalf("cursors %+v", open.Cursors)
	case !bytes.Equal(open.Marker, transfer.EncodeMarker(marker)):
		t.Fatalf("marker %q", open.Marker)
	case open.ListedAtMs < before || open.ListedAtMs > time.Now().UnixMilli() || open.Token != "":
		t.Fatalf("listed_at %d token %q", open.ListedAtMs, open.Token)
	case len(open.Segments) < 2:
		t.Fatalf("%d segments; the test needs rolls", len(open.Segments))
	}
	for i, s := range open.Segments {
		last := i == len(open.Segments)-1
		if s.Sealed == last || s.Size != fileSizeOf(t, dir, s.Base) || s.MtimeMs == 0 {
			t.Fatalf("segment %+v (file %d bytes)", s, fileSizeOf(t, dir, s.Base))
		}
	}

	n.closePart(top, 0)
	closed := n.listing(top, 0)
	if n.e.parts.Peek(top.Name, 0) != nil {
		t.Fatal("listing a CLEAN closed partition opened it")
	}
	closed.ListedAtMs, open.ListedAtMs = 0, 0
	if !sameListing(closed, open) {
		t.Fatalf("closed listing %+v\nopen listing %+v", closed, open)
	}
}

// A closed partition whose HWM is not exact is opened first: its HWM is the recovered one.
func TestTransferListingOpensAClosedPartitionWithoutACleanHWM(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "dirty", Partitions: 3})
	n.mustCommit(top, 0, "a", "b", "c")
	n.closePart(top, 0)
	legacy := make([]byte, 8) // a v1 hwm file: never exact
	binary.BigEndian.PutUint64(legacy, 3)
	if err := os.WriteFile(filepath.Join(n.partDir(top.Name, 0), plog.HWMFileName), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	l := n.listing(top, 0)
	if n.e.parts.Peek(top.Name, 0) == nil {
		t.Fatal("a closed partition without a CLEAN hwm was listed without opening it")
	}
	if l.HighWatermark != 3 || len(l.Segments) != 1 || l.Segments[0].Size != fileSizeOf(t, n.partDir(top.Name, 0), 0) {
		t.Fatalf("listing after recovery: hwm %d segments %+v", l.HighWatermark, l.Segments)
	}
}

// MV-13: with a hidden tail (frames past the HWM) neither the listing nor a fetch reaches past
// the committed boundary, open or closed.
func TestTransferNeverPassesTheCommittedBoundary(t *testing.T) {
	resetFaults(t)
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "hidden", Partitions: 3})
	n.mustCommit(top, 0, "visible")
	faults.Set(plog.FaultBeforeHWMPersist, nil)
	if _, err := n.commit(top, 0, "hidden-1", "hidden-2"); err == nil {
		t.Fatal("commit with a failing hwm persist succeeded")
	}
	faults.Reset()
	// The failed log is closed without a CLEAN hwm; the listing reopens (recovers) it.
	eventually(t, 5*time.Second, func() bool { return n.e.parts.Peek(top.Name, 0) == nil }, "failed log closed")
	dir := n.partDir(top.Name, 0)
	fileSize := fileSizeOf(t, dir, 0)
	check := func(how string) {
		l := n.listing(top, 0)
		if l.HighWatermark != 1 || len(l.Segments) != 1 || l.Segments[0].Size >= fileSize {
			t.Fatalf("%s: hwm %d segments %+v; the file holds %d bytes with a hidden tail", how, l.HighWatermark, l.Segments, fileSize)
		}
		got := n.fetchAll(top, 0, l, 7)[0]
		raw, _ := os.ReadFile(filepath.Join(dir, plog.SegmentFileName(0)))
		if int64(len(got)) != l.Segments[0].Size || !bytes.Equal(got, raw[:len(got)]) {
			t.Fatalf("%s: fetched %d bytes, listed %d", how, len(got), l.Segments[0].Size)
		}
		if b, err := n.e.FetchSegmentChunk(n.ctx(), top.Name, 0, 0, l.Segments[0].Size, 1<<10); err != nil || len(b) != 0 {
			t.Fatalf("%s: fetch at the boundary returned %d bytes, err %v", how, len(b), err)
		}
	}
	check("recovered open log")
	if n.e.parts.Peek(top.Name, 0) == nil {
		t.Fatal("listing did not open the not-CLEAN partition")
	}
	n.closePart(top, 0)
	check("closed log with a CLEAN hwm")
	if n.e.parts.Peek(top.Name, 0) != nil {
		t.Fatal("transfer of a CLEAN closed partition opened it")
	}
}

// A fetch is capped at transfer.ChunkBytes; an unknown segment is a 503 naming ErrNoSegment.
func TestFetchSegmentChunkIsCappedAndRefusesUnknownSegments(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "big", Partitions: 3})
	rec := wal.Record{Topic: top.Name, Incarnation: top.Incarnation, Payload: bytes.Repeat([]byte("z"), transfer.ChunkBytes+(512<<10))}
	if _, err := n.e.CommitLocal(n.ctx(), top.Name, top.Incarnation, 0, []wal.Record{rec}); err != nil {
		t.Fatal(err)
	}
	for _, closed := range []bool{false, true} {
		if closed {
			n.closePart(top, 0)
		}
		b, err := n.e.FetchSegmentChunk(n.ctx(), top.Name, 0, 0, 0, 2*transfer.ChunkBytes)
		if err != nil || len(b) != transfer.ChunkBytes {
			t.Fatalf("closed=%v: fetched %d bytes (err %v), want the %d-byte cap", closed, len(b), err, transfer.ChunkBytes)
		}
		_, err = n.e.FetchSegmentChunk(n.ctx(), top.Name, 0, 999, 0, 10)
		if !errors.Is(err, plog.ErrNoSegment) || !errors.Is(err, errcode.ErrUnavailable) || !errors.Is(err, transfer.ErrUnavailable) {
			t.Fatalf("closed=%v: unknown segment: %v, want ErrNoSegment as a 503", closed, err)
		}
	}
}

// The transfer endpoints answer only on the owner, and 404 for what the replica lacks.
func TestTransferEndpointsRefuseNonOwnersAndUnknownPartitions(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "127.0.0.1:4",
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "owners", Partitions: 3})
	if a, _ := n.store.Assignment(top.Name, 1); a.Owner != "n2" {
		t.Fatalf("partition 1 placed on %q, want n2", a.Owner)
	}
	calls := map[string]func(topic string, p int) error{
		"list":  func(tp string, p int) error { _, err := n.e.TransferListing(n.ctx(), tp, p); return err },
		"fetch": func(tp string, p int) error { _, err := n.e.FetchSegmentChunk(n.ctx(), tp, p, 0, 0, 10); return err },
		"arm": func(tp string, p int) error {
			_, err := n.e.PrepareHandoff(n.ctx(), tp, p, transfer.PrepareRequest{})
			return err
		},
		"re-arm": func(tp string, p int) error {
			_, err := n.e.PrepareHandoff(n.ctx(), tp, p, transfer.PrepareRequest{Token: "ab"})
			return err
		},
		"fence": func(tp string, p int) error {
			_, err := n.e.PrepareHandoff(n.ctx(), tp, p, transfer.PrepareRequest{Token: "ab", Fence: true})
			return err
		},
	}
	for name, call := range calls {
		if err := call(top.Name, 1); !errors.Is(err, errcode.ErrNotOwner) || !errors.Is(err, transfer.ErrNotOwner) {
			t.Errorf("%s on another node's partition: %v, want not owner", name, err)
		}
		for _, c := range []struct {
			topic string
			p     int
		}{{"nope", 0}, {top.Name, 3}, {top.Name, -1}} {
			err := call(c.topic, c.p)
			if !errors.Is(err, errcode.ErrTopicGone) || !errors.Is(err, errcode.ErrNotFound) || !errors.Is(err, transfer.ErrNotFound) {
				t.Errorf("%s on %s/%d: %v, want not found", name, c.topic, c.p, err)
			}
		}
	}
	if n.e.parts.Peek(top.Name, 1) != nil || !isGone(n.partDir(top.Name, 1)) {
		t.Fatal("a refused transfer call opened or created another node's partition")
	}
}

func sameListing(a, b transfer.Listing) bool {
	if len(a.Segments) != len(b.Segments) || len(a.Cursors) != len(b.Cursors) || len(a.AckedAhead) != len(b.AckedAhead) {
		return false
	}
	for i := range a.Segments {
		if a.Segments[i] != b.Segments[i] {
			return false
		}
	}
	for i := range a.Cursors {
		if a.Cursors[i].Child != b.Cursors[i].Child || !bytes.Equal(a.Cursors[i].Record, b.Cursors[i].Record) {
			return false
		}
	}
	for i := range a.AckedAhead {
		if a.AckedAhead[i] != b.AckedAhead[i] {
			return false
		}
	}
	return a.HighWatermark == b.HighWatermark && a.OldestOffset == b.OldestOffset &&
		a.CommittedOffset == b.CommittedOffset && a.HasCommitted == b.HasCommitted &&
		bytes.Equal(a.Marker, b.Marker) && a.Incarnation == b.Incarnation
}
