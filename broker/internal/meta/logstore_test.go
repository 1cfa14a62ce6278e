package meta

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func testLog(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: i/3 + 1, Type: raft.LogCommand,
		Data: []byte{byte(i), 'd'}, Extensions: []byte("ext"), AppendedAt: time.Unix(1700000000, int64(i))}
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data) &&
		bytes.Equal(a.Extensions, b.Extensions) && a.AppendedAt.Equal(b.AppendedAt)
}

// CL-1: the pebble store honours the raft.LogStore / raft.StableStore contract and survives a
// reopen.
func TestLogStoreConformance(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLogStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 0 || last != 0 {
		t.Fatalf("empty store: first %d last %d, want 0 0", first, last)
	}
	var got raft.Log
	if err := s.GetLog(1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty store: %v, want ErrLogNotFound", err)
	}

	if err := s.StoreLog(testLog(1)); err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(2); i <= 20; i++ {
		batch = append(batch, testLog(i))
	}
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 20; i++ {
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if !sameLog(&got, testLog(i)) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *testLog(i))
		}
	}
	zero := &raft.Log{Index: 21, Term: 9, Type: raft.LogNoop}
	if err := s.StoreLog(zero); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(21, &got); err != nil || !sameLog(&got, zero) || !got.AppendedAt.IsZero() {
		t.Fatalf("zero-time entry round trip: %+v, %v", got, err)
	}
	if err := s.GetLog(22, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end: %v, want ErrLogNotFound", err)
	}

	if err := s.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	first, _ = s.FirstIndex()
	last, _ = s.LastIndex()
	if first != 6 || last != 21 {
		t.Fatalf("after DeleteRange(1,5): first %d last %d, want 6 21", first, last)
	}
	if err := s.GetLog(5, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a deleted index: %v", err)
	}
	if err := s.DeleteRange(18, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	if last, _ = s.LastIndex(); last != 17 {
		t.Fatalf("after suffix delete: last %d, want 17", last)
	}

	// Stable store.
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Fatalf("Get(missing) = %q, %v; want empty, nil", v, err)
	}
	if v, err := s.GetUint64([]byte("missing")); err != nil || v != 0 {
		t.Fatalf("GetUint64(missing) = %d, %v", v, err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenLogStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ = s.FirstIndex()
	last, _ = s.LastIndex()
	if first != 6 || last != 17 {
		t.Fatalf("after reopen: first %d last %d, want 6 17", first, last)
	}
	if err := s.GetLog(10, &got); err != nil || !sameLog(&got, testLog(10)) {
		t.Fatalf("after reopen GetLog(10) = %+v, %v", got, err)
	}
	if v, _ := s.Get([]byte("LastVoteCand")); string(v) != "node-1" {
		t.Fatalf("after reopen Get = %q", v)
	}
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 42 {
		t.Fatalf("after reopen GetUint64 = %d", v)
	}
}

// The stable keyspace and the log keyspace never see each other's keys.
func TestLogStoreStableKeysDoNotLeakIntoLog(t *testing.T) {
	s, err := OpenLogStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 0 {
		t.Fatalf("stable write made FirstIndex %d", first)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Fatalf("stable write made LastIndex %d", last)
	}
}

func FuzzDecodeLogEntry(f *testing.F) {
	f.Add(encodeLogEntry(testLog(3)))
	f.Add(encodeLogEntry(&raft.Log{}))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLogEntry(b, &l); err != nil {
			return
		}
		// A decodable entry survives a re-encode unchanged.
		var l2 raft.Log
		if err := decodeLogEntry(encodeLogEntry(&l), &l2); err != nil || !sameLog(&l, &l2) {
			t.Fatalf("re-encode changed the entry: %+v → %+v (%v)", l, l2, err)
		}
	})
}
