package consume

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func TestJournalRecordLayoutIsFixed16Bytes(t *testing.T) {
	b := AppendJournalRecord(nil, JournalRecord{Frontier: 0x0102030405060708, Seq: 0x0a0b0c0d})
	want := "0102030405060708" + "0a0b0c0d"
	if got := hex.EncodeToString(b[:12]); got != want {
		t.Fatalf("record body %s, want %s", got, want)
	}
	if crc := binary.BigEndian.Uint32(b[12:]); crc != crc32.Checksum(b[:12], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("trailer is not CRC-32C of [0,12)")
	}
	if len(b) != 16 {
		t.Fatalf("len %d", len(b))
	}
}

func TestDecodeJournalLastValidRecordWins(t *testing.T) {
	var img []byte
	for i := int64(0); i < 5; i++ {
		img = AppendJournalRecord(img, JournalRecord{Frontier: 10 * i, Seq: uint32(i + 1)})
	}
	full := append([]byte(nil), img...)
	badLast := append([]byte(nil), img...)
	badLast[len(badLast)-1] ^= 0xff
	stale := AppendJournalRecord(append([]byte(nil), img...), JournalRecord{Frontier: 999, Seq: 2})
	cases := []struct {
		name   string
		img    []byte
		want   int64
		wantOK bool
	}{
		{"whole file", full, 40, true},
		{"torn tail ignored", append(full, 0xde, 0xad, 0xbe), 40, true},
		{"bad crc on last record", badLast, 30, true},
		{"sequence going back is a stale tail", stale, 40, true},
		{"empty", nil, 0, false},
		{"only a torn record", full[:15], 0, false},
		{"zeros after a crash", make([]byte, 64), 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := DecodeJournal(tc.img)
			if ok != tc.wantOK || (ok && r.Frontier != tc.want) {
				t.Fatalf("DecodeJournal = %+v %v, want frontier %d ok %v", r, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCheckpointRoundTripAndLayout(t *testing.T) {
	c := Checkpoint{Frontier: 41, AckedAhead: []int64{43, 44, 50}}
	b := EncodeCheckpoint(c)
	if string(b[:4]) != "NCO1" || len(b) != 20+8*3 {
		t.Fatalf("bad header/length: % x", b[:8])
	}
	if binary.BigEndian.Uint32(b[4:8]) != crc32.Checksum(b[8:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("crc is not over [8,end)")
	}
	if int64(binary.BigEndian.Uint64(b[8:16])) != 41 || binary.BigEndian.Uint32(b[16:20]) != 3 {
		t.Fatal("frontier or count misplaced")
	}
	got, err := DecodeCheckpoint(b)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip = %+v %v", got, err)
	}
	empty, err := DecodeCheckpoint(EncodeCheckpoint(Checkpoint{Frontier: -1}))
	if err != nil || empty.Frontier != -1 || empty.AckedAhead != nil {
		t.Fatalf("empty round trip = %+v %v", empty, err)
	}
}

func TestDecodeCheckpointRejectsDamage(t *testing.T) {
	good := EncodeCheckpoint(Checkpoint{Frontier: 5, AckedAhead: []int64{7, 9}})
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], castagnoli))
		return b
	}
	cases := map[string][]byte{
		"bad magic":       mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"flipped payload": mutate(func(b []byte) []byte { b[25] ^= 1; return b }),
		"truncated":       good[:len(good)-3],
		"short header":    good[:12],
		"count too big":   mutate(func(b []byte) []byte { b[19] = 3; return recrc(b) }),
		"not ascending": mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[28:], 7)
			return recrc(b)
		}),
		"at or below frontier": mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[20:], 5)
			return recrc(b)
		}),
		"frontier below -1": mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[8:], uint64(0xfffffffffffffff0))
			return recrc(b)
		}),
	}
	for name, b := range cases {
		if _, err := DecodeCheckpoint(b); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: err = %v, want ErrBadCheckpoint", name, err)
		}
	}
}

func TestLegacyEightByteCheckpointIsFrontierOnly(t *testing.T) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], 1234)
	c, err := DecodeCheckpoint(b[:])
	if err != nil || c.Frontier != 1234 || len(c.AckedAhead) != 0 {
		t.Fatalf("legacy decode = %+v %v", c, err)
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func journal(recs ...JournalRecord) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendJournalRecord(b, r)
	}
	return b
}

func TestST14ConsumerRecovery(t *testing.T) {
	legacy := make([]byte, 8)
	binary.BigEndian.PutUint64(legacy, 20)
	cases := []struct {
		name       string
		checkpoint []byte
		journal    []byte
		want       Checkpoint
	}{
		{"no files", nil, nil, Checkpoint{Frontier: -1}},
		{"journal ahead of checkpoint",
			EncodeCheckpoint(Checkpoint{Frontier: 10, AckedAhead: []int64{12, 30}}),
			journal(JournalRecord{11, 1}, JournalRecord{25, 2}),
			Checkpoint{Frontier: 25, AckedAhead: []int64{30}}},
		{"torn journal tail ignored",
			EncodeCheckpoint(Checkpoint{Frontier: 10}),
			append(journal(JournalRecord{15, 1}), AppendJournalRecord(nil, JournalRecord{99, 2})[:9]...),
			Checkpoint{Frontier: 15}},
		{"checkpoint ahead of stale journal",
			EncodeCheckpoint(Checkpoint{Frontier: 50, AckedAhead: []int64{52}}),
			journal(JournalRecord{40, 7}),
			Checkpoint{Frontier: 50, AckedAhead: []int64{52}}},
		{"acked-ahead at or below frontier dropped, run collapsed",
			EncodeCheckpoint(Checkpoint{Frontier: 5, AckedAhead: []int64{6, 8, 9, 11}}),
			journal(JournalRecord{7, 1}),
			Checkpoint{Frontier: 9, AckedAhead: []int64{11}}},
		{"legacy checkpoint", legacy, nil, Checkpoint{Frontier: 20}},
		{"corrupt checkpoint falls back to journal", []byte("NCO1garbagegarbagegarbage"), journal(JournalRecord{3, 1}),
			Checkpoint{Frontier: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.checkpoint != nil {
				writeFile(t, dir, CheckpointFile, tc.checkpoint)
			}
			if tc.journal != nil {
				writeFile(t, dir, JournalFile, tc.journal)
			}
			s, err := OpenShard(0, dir, newSource(0), ShardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Frontier(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("recovered %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRecoveredFrontierNotClampedToHighWatermark(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, CheckpointFile, EncodeCheckpoint(Checkpoint{Frontier: 100}))
	src := newSource(10)
	s, err := OpenShard(0, dir, src, ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.State().Committed != 100 {
		t.Fatalf("frontier clamped to %d", s.State().Committed)
	}
	if ds, out := s.Reserve(lim, 5, 0); out != Empty || len(ds) != 0 {
		t.Fatalf("reserve below recovered frontier = %v %v", offsetsOf(ds), out)
	}
	src.set(func(f *fakeSource) { f.hwm = 103 })
	if ds, _ := s.Reserve(lim, 5, 0); !equalOffsets(offsetsOf(ds), []int64{101, 102}) {
		t.Fatalf("reserved %v, want [101 102]", offsetsOf(ds))
	}
}

func TestRecoveredAckedAheadNeverRedelivered(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, CheckpointFile, EncodeCheckpoint(Checkpoint{Frontier: 1, AckedAhead: []int64{3, 4, 6}}))
	s, err := OpenShard(0, dir, newSource(8), ShardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds, _ := s.Reserve(lim, 10, 0)
	if !equalOffsets(offsetsOf(ds), []int64{2, 5, 7}) {
		t.Fatalf("reserved %v, want [2 5 7]", offsetsOf(ds))
	}
}

func FuzzDecodeJournal(f *testing.F) {
	f.Add([]byte{})
	f.Add(journal(JournalRecord{-1, 1}))
	f.Add(journal(JournalRecord{5, 1}, JournalRecord{9, 2}, JournalRecord{3, 1}))
	f.Add(append(journal(JournalRecord{5, 1}), 1, 2, 3))
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := DecodeJournal(b)
		if !ok {
			return
		}
		if r.Frontier < -1 {
			t.Fatalf("accepted frontier %d", r.Frontier)
		}
		// The result is a record that is really in the image, at a record boundary.
		enc := AppendJournalRecord(nil, r)
		found := false
		for i := 0; i+16 <= len(b); i += 16 {
			if bytes.Equal(b[i:i+16], enc) {
				found = true
			}
		}
		if !found {
			t.Fatalf("decoded %+v is not a record of the image", r)
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Add(EncodeCheckpoint(Checkpoint{Frontier: -1}))
	f.Add(EncodeCheckpoint(Checkpoint{Frontier: 7, AckedAhead: []int64{9, 12, 1 << 40}}))
	f.Add([]byte("NCO1\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("error %v does not wrap ErrBadCheckpoint", err)
			}
			return
		}
		if len(b) == 8 {
			return // legacy: frontier only
		}
		// Whatever decodes re-encodes to the same bytes.
		if again := EncodeCheckpoint(c); !bytes.Equal(again, b) {
			t.Fatalf("re-encode mismatch: %x vs %x", again, b)
		}
	})
}

// A follower's copy of its leader's consumer state seeds the shard it opens as the next
// leader; bytes that are not a checkpoint are refused and change nothing.
func TestReplicatedCheckpointSeedsTheNextLeadersShard(t *testing.T) {
	dir := t.TempDir()
	if err := StoreReplicatedCheckpoint(dir, []byte("not a checkpoint")); err == nil {
		t.Fatal("garbage stored as a checkpoint")
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused copy left a file: %v", err)
	}
	if err := StoreReplicatedCheckpoint(dir, EncodeCheckpoint(Checkpoint{Frontier: 41, AckedAhead: []int64{43, 45}})); err != nil {
		t.Fatal(err)
	}
	rec, err := readConsumerFiles(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Frontier != 41 || !slices.Equal(rec.AckedAhead, []int64{43, 45}) {
		t.Fatalf("recovered %+v", rec.Checkpoint)
	}
}
