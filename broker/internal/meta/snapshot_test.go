package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/faults"
)

// memSink is a raft.SnapshotSink collecting the stream in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string       { return "mem" }
func (s *memSink) Close() error     { s.closed = true; return nil }
func (s *memSink) Cancel() error    { s.cancelled = true; return nil }
func (s *memSink) Snapshot() []byte { return s.Bytes() }

var _ raft.SnapshotSink = (*memSink)(nil)

func snapshotOf(t *testing.T, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v after a good persist", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func populated(t *testing.T) *testFSM {
	tf := newTestFSM(t)
	for _, l := range workload(t, 30) {
		tf.f.Apply(l)
		tf.index = l.Index
	}
	tf.must(OutcomeOK, OpSeedRootUser, userCmd{User: User{Username: "admin"}})
	return tf
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := populated(t)
	data := snapshotOf(t, src.f)

	dst := newTestFSM(t)
	dst.must(OutcomeOK, OpCreateTopic, createCmd("stale", 3, "n9")) // replaced by the restore
	dst.must(OutcomeOK, OpMemberJoin, member("n9", 1))
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	sameState(t, src.f, dst.f)
	if dst.f.applied() != src.f.applied() {
		t.Fatalf("applied %d after restore, want %d", dst.f.applied(), src.f.applied())
	}
	if dst.store().TopicCount() != src.store().TopicCount() || !dst.store().RootSeeded() {
		t.Fatalf("topic count %d (want %d), root seeded %v", dst.store().TopicCount(), src.store().TopicCount(), dst.store().RootSeeded())
	}
	// The restored FSM keeps applying from the snapshot's index.
	dst.index = dst.f.applied()
	dst.must(OutcomeOK, OpCreateTopic, createCmd("after", 3, ""))
	// An entry at or below the restored index is a replay.
	if r := dst.f.Apply(entry(t, 3, OpCreateTopic, createCmd("zz", 3, ""))).(Result); r.Outcome != OutcomeSkipped {
		t.Fatalf("entry below the restored index: %v", r.Outcome)
	}
}

func TestRestoreUsesSnapshotIndexWhenAhead(t *testing.T) {
	src := populated(t)
	data := snapshotOf(t, src.f)
	dst := newTestFSM(t)
	if err := dst.f.restore(bytes.NewReader(data), src.f.applied()+5); err != nil {
		t.Fatal(err)
	}
	if dst.f.applied() != src.f.applied()+5 {
		t.Fatalf("applied %d, want the snapshot's raft index %d", dst.f.applied(), src.f.applied()+5)
	}
}

func TestRestoreRejectsCorruptStreamAndKeepsState(t *testing.T) {
	src := populated(t)
	good := snapshotOf(t, src.f)
	cases := map[string]func([]byte) []byte{
		"trailer flipped": func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b },
		"body flipped":    func(b []byte) []byte { b[10] ^= 0x01; return b },
		"truncated":       func(b []byte) []byte { return b[:len(b)/2] },
		"empty":           func(b []byte) []byte { return nil },
		"bad framing with valid crc": func([]byte) []byte {
			body := []byte{0, 0, 0, 9, 'x'}
			return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
		},
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			dst := newTestFSM(t)
			dst.must(OutcomeOK, OpCreateTopic, createCmd("keep", 3, "n1"))
			before := dump(t, dst.f)
			err := dst.f.Restore(io.NopCloser(bytes.NewReader(corrupt(bytes.Clone(good)))))
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("Restore = %v, want ErrCorruptSnapshot", err)
			}
			if after := dump(t, dst.f); len(after) != len(before) || dst.f.applied() != 1 {
				t.Fatal("a rejected snapshot changed the state")
			}
		})
	}
}

func TestRestoreFaultLeavesStateUntouched(t *testing.T) {
	t.Cleanup(faults.Reset)
	src := populated(t)
	data := snapshotOf(t, src.f)
	dst := newTestFSM(t)
	dst.must(OutcomeOK, OpCreateTopic, createCmd("keep", 3, "n1"))
	faults.Set("meta.fsm.before_restore", nil)
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("Restore = %v, want the injected fault", err)
	}
	if _, ok := dst.f.topic("keep"); !ok {
		t.Fatal("failed restore wiped the state")
	}
}

func TestPersistFailureCancelsSink(t *testing.T) {
	t.Cleanup(faults.Reset)
	tf := populated(t)
	snap, err := tf.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	faults.Set("meta.snapshot.persist", nil)
	var sink memSink
	if err := snap.Persist(&sink); !errors.Is(err, faults.ErrInjected) || !sink.cancelled || sink.closed {
		t.Fatalf("Persist = %v, cancelled=%v closed=%v; want error and a cancelled sink", err, sink.cancelled, sink.closed)
	}
}

func FuzzSnapshotRestore(f *testing.F) {
	seed := func(kv ...string) []byte {
		var b []byte
		for _, s := range kv {
			b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
		return b
	}
	f.Add(seed("m/applied", `{"index":4,"term":1}`, "t/a", `{"name":"a"}`), true)
	f.Add(seed("a", "b"), false)
	f.Add([]byte{}, true)
	f.Add([]byte{0, 0, 0, 0}, true)
	f.Add(seed("m/applied", `nope`), true)
	dst, err := openFSM(f.TempDir(), nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = dst.close() })
	f.Fuzz(func(t *testing.T, body []byte, addCRC bool) {
		data := body
		if addCRC {
			data = binary.BigEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		}
		recs, derr := decodeSnapshot(data)
		err := dst.restore(bytes.NewReader(data), 0)
		if (derr == nil) != (err == nil) && !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("decode %v but restore %v", derr, err)
		}
		if err != nil {
			return
		}
		want := map[string]string{}
		for _, r := range recs {
			if string(r.key) != string(keyApplied) {
				want[string(r.key)] = string(r.value)
			}
		}
		got := map[string]string{}
		dst.scanRecords(nil, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, func(k, v []byte) bool {
			if string(k) != string(keyApplied) {
				got[string(k)] = string(v)
			}
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("restored %d keys, stream had %d", len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("key %q restored as %q, stream had %q", k, got[k], v)
			}
		}
	})
}
