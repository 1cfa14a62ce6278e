package meta

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// testFSM drives an fsm directly with raft.Log entries, as raft's FSM goroutine would.
type testFSM struct {
	t      *testing.T
	f      *fsm
	index  uint64
	events []Event
}

func newTestFSM(t *testing.T) *testFSM {
	t.Helper()
	return openTestFSM(t, filepath.Join(t.TempDir(), "fsm"), nil)
}

func openTestFSM(t *testing.T, dir string, fs vfs.FS) *testFSM {
	t.Helper()
	tf := &testFSM{t: t}
	f, err := openFSM(dir, fs, nil, func(e Event) { tf.events = append(tf.events, e) })
	if err != nil {
		t.Fatal(err)
	}
	tf.f = f
	tf.index = f.applied()
	t.Cleanup(func() { _ = f.close() })
	return tf
}

// entry builds the log entry of one command.
func entry(t *testing.T, index uint64, op uint8, payload any) *raft.Log {
	t.Helper()
	data, err := encodeCommand(op, payload)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// apply applies one command at the next index and returns the result.
func (tf *testFSM) apply(op uint8, payload any) Result {
	tf.t.Helper()
	tf.index++
	return tf.f.Apply(entry(tf.t, tf.index, op, payload)).(Result)
}

// must applies and fails the test unless the outcome is want.
func (tf *testFSM) must(want Outcome, op uint8, payload any) Result {
	tf.t.Helper()
	r := tf.apply(op, payload)
	if r.Outcome != want {
		tf.t.Fatalf("op %d %+v: outcome %v (%s), want %v", op, payload, r.Outcome, r.Reason, want)
	}
	return r
}

// store wraps the fsm in a Store shell so the Store's read methods can be used on it.
func (tf *testFSM) store() *Store { return &Store{fsm: tf.f} }

func (tf *testFSM) topic(name string) Topic {
	tf.t.Helper()
	top, ok := tf.f.topic(name)
	if !ok {
		tf.t.Fatalf("topic %q missing", name)
	}
	return top
}

func newTopic(name string, partitions int) Topic {
	return Topic{Name: name, Partitions: partitions, RetentionMs: DefaultRetentionMs,
		VisibilityTimeoutMs: DefaultVisibilityTimeoutMs, MaxInFlightPerPartition: DefaultMaxInFlight,
		MaxAckedAheadPerPartition: DefaultMaxAckedAhead, CreatedAt: 1700000000,
		Incarnation: "00000000000000" + name[:min(2, len(name))], Role: RoleStandalone}
}

func createCmd(name string, partitions int, owner string) createTopicCmd {
	c := createTopicCmd{Topic: newTopic(name, partitions)}
	if owner != "" {
		for p := 0; p < partitions; p++ {
			c.Assignments = append(c.Assignments, Assignment{Topic: name, Partition: p, Owner: owner})
		}
	}
	return c
}

func attach(parent, child, epoch string, delay int64) attachCmd {
	return attachCmd{Child: child, AttachSpec: AttachSpec{Parent: parent, Epoch: epoch, DelayMs: delay}}
}

// dump returns every key/value of the FSM except m/applied, for state comparisons.
func dump(t *testing.T, f *fsm) map[string]string {
	t.Helper()
	out := map[string]string{}
	f.scanRecords(nil, []byte{0xff}, func(k, v []byte) bool {
		if string(k) != string(keyApplied) {
			out[string(k)] = string(v)
		}
		return true
	})
	return out
}

func sameState(t *testing.T, a, b *fsm) {
	t.Helper()
	da, db := dump(t, a), dump(t, b)
	if !reflect.DeepEqual(da, db) {
		t.Fatalf("states differ:\n%v\n%v", da, db)
	}
}

// rawRemote is the FSM's stored bytes of a remote link (nil when absent).
func (tf *testFSM) rawRemote(parent, id string) []byte {
	tf.t.Helper()
	v, closer, err := tf.f.db.Get(remoteKey(parent, id))
	if err != nil {
		return nil
	}
	defer closer.Close()
	return bytes.Clone(v)
}
