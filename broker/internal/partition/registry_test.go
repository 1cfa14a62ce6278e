package partition

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// fixture is a Registry over a temporary data directory with one topic whose ownership and
// clock the test controls.
type fixture struct {
	r     *Registry
	dir   string
	topic meta.Topic

	mu      sync.Mutex
	now     time.Time
	owns    func(call int) bool // nil: owned
	calls   int                 // Owns calls since the last reset
	gone    bool                // the local replica lost the topic
	floored int                 // RaiseFloor calls
}

// newFixture builds the fixture; opts adjust the registry's Deps before New.
func newFixture(t testing.TB, opts ...func(*Deps)) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), now: time.UnixMilli(1_700_000_000_000),
		topic: meta.Topic{Name: "t", Incarnation: "0123456789abcdef", Partitions: 2}}
	d := Deps{
		Layout:  datadir.New(f.dir),
		Now:     f.clock,
		Offsets: consume.NewCommitter(consume.CommitterOptions{}),
		Topic: func(name string) (meta.Topic, bool) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.topic, name == f.topic.Name && !f.gone
		},
		Owns: func(string, int) bool {
			f.mu.Lock()
			f.calls++
			call, owns := f.calls, f.owns
			f.mu.Unlock()
			return owns == nil || owns(call)
		},
		RaiseFloor: func(_ string, _ int, t0 int64) int64 {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.floored++
			return t0
		},
	}
	for _, o := range opts {
		o(&d)
	}
	f.r = New(d)
	t.Cleanup(f.r.CloseAll)
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) step(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// resetOwns counts Owns calls from zero and answers them with owns (nil: always owned).
func (f *fixture) resetOwns(owns func(call int) bool) {
	f.mu.Lock()
	f.calls, f.owns = 0, owns
	f.mu.Unlock()
}

func (f *fixture) get(t *testing.T, p int) *Partition {
	t.Helper()
	pt, err := f.r.Get(f.topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

func batch(payloads ...string) []wal.Record {
	out := make([]wal.Record, len(payloads))
	for i, p := range payloads {
		out[i] = wal.Record{Payload: []byte(p)}
	}
	return out
}

func TestGetStampsAccessAndPeekNeverOpensOrStamps(t *testing.T) {
	f := newFixture(t)
	if f.r.Peek("t", 0) != nil {
		t.Fatal("Peek returned a partition nobody opened")
	}
	if _, err := os.Stat(f.r.PartitionDir("t", 0)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Peek created the partition directory: %v", err)
	}
	pt := f.get(t, 0)
	if !pt.LastAccess().Equal(f.clock()) {
		t.Fatalf("Get stamped %v, want %v", pt.LastAccess(), f.clock())
	}
	f.step(time.Minute)
	if f.r.Peek("t", 0) != pt {
		t.Fatal("Peek did not return the open partition")
	}
	if pt.LastAccess().Equal(f.clock()) {
		t.Fatal("Peek stamped the access time")
	}
	if f.get(t, 0) != pt || !pt.LastAccess().Equal(f.clock()) {
		t.Fatal("a second Get did not return the same partition stamped now")
	}
}

func TestNoShardAttachesOnceClosed(t *testing.T) {
	f := newFixture(t)
	pt := f.get(t, 0)
	f.r.ClosePartition(pt)
	if !pt.Closed() || f.r.Peek("t", 0) != nil {
		t.Fatal("a closed partition is still registered")
	}
	if _, err := f.r.ShardOf(f.topic, pt); !errors.Is(err, plog.ErrClosed) {
		t.Fatalf("ShardOf a closed partition: %v, want log.ErrClosed", err)
	}
	if pt.Shard() != nil {
		t.Fatal("a shard attached to a closed partition")
	}
}

func TestOpenRefusesAnIncarnationTheReplicaNoLongerNames(t *testing.T) {
	f := newFixture(t)
	f.gone = true
	if _, err := f.r.Get(f.topic, 0); !errors.Is(err, errcode.ErrTopicGone) {
		t.Fatalf("Get of a deleted topic: %v, want errcode.ErrTopicGone", err)
	}
	if _, err := os.Stat(f.r.TopicDir("t")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused open created the topic directory: %v", err)
	}
}

// The produce gate: each refusal answers its sentinel and appends nothing.
func TestCommitGateRefusesWithItsSentinelAndAppendsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs after the partition is open and before Commit; it returns the Owns
		// answers Commit sees (call 1: the fast gate, call 2: under the produce lock).
		setup func(t *testing.T, f *fixture, pt *Partition) func(call int) bool
		want  []error
	}{
		{
			name:  "not the owner",
			setup: func(*testing.T, *fixture, *Partition) func(int) bool { return func(int) bool { return false } },
			want:  []error{errcode.ErrNotOwner},
		},
		{
			name: "ownership lost before the produce lock",
			setup: func(*testing.T, *fixture, *Partition) func(int) bool {
				return func(call int) bool { return call < 2 }
			},
			want: []error{errcode.ErrNotOwner},
		},
		{
			name: "frozen",
			setup: func(t *testing.T, f *fixture, pt *Partition) func(int) bool {
				if !f.r.ArmFreeze(pt, "tok", time.Minute) {
					t.Fatal("arm refused")
				}
				return nil
			},
			want: []error{ErrFrozen, errcode.ErrUnavailable},
		},
		{
			name: "frozen after the fast gate",
			setup: func(t *testing.T, f *fixture, pt *Partition) func(int) bool {
				return func(call int) bool {
					if call == 2 { // under the produce lock: lock order commitMu → shardMu holds
						f.r.ArmFreeze(pt, "tok", time.Minute)
					}
					return true
				}
			},
			want: []error{ErrFrozen, errcode.ErrUnavailable},
		},
		{
			name: "closed before the produce lock",
			setup: func(t *testing.T, f *fixture, pt *Partition) func(int) bool {
				return func(call int) bool {
					if call == 2 { // deregistered as a close does, before it takes the lock
						t.Cleanup(func() { f.r.ClosePartition(pt) })
						f.r.mu.Lock()
						delete(f.r.open, pt.key)
						f.r.mu.Unlock()
					}
					return true
				}
			},
			want: []error{errcode.ErrUnavailable},
		},
		{
			name: "fault after the gate",
			setup: func(t *testing.T, _ *fixture, _ *Partition) func(int) bool {
				faults.Set(FaultCommitAfterGate, nil)
				t.Cleanup(func() { faults.Clear(FaultCommitAfterGate) })
				return nil
			},
			want: []error{errcode.ErrUnavailable},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pt := f.get(t, 1)
			f.resetOwns(tc.setup(t, f, pt))
			_, err := f.r.Commit(f.topic, 1, batch("x"))
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Fatalf("Commit: %v, want %v", err, want)
				}
			}
			if n := pt.Log().NextOffset(); n != 0 {
				t.Fatalf("the refused commit appended: next offset %d", n)
			}
			if f.floored != 0 {
				t.Fatal("a refused commit raised the commit-time floor")
			}
		})
	}
}

func TestCommitOpensStampsAndAppends(t *testing.T) {
	f := newFixture(t)
	first, err := f.r.Commit(f.topic, 0, batch("a", "b"))
	if err != nil || first != 0 {
		t.Fatalf("Commit: %d, %v", first, err)
	}
	if first, err = f.r.Commit(f.topic, 0, batch("c")); err != nil || first != 2 {
		t.Fatalf("second Commit: %d, %v, want offset 2", first, err)
	}
	r, err := f.r.Peek("t", 0).Log().Read(2)
	if err != nil || r.CommittedAt != f.clock().UnixMilli() {
		t.Fatalf("record 2: %+v, %v; want committed at %d", r, err, f.clock().UnixMilli())
	}
	if f.floored != 2 {
		t.Fatalf("RaiseFloor called %d times, want 2", f.floored)
	}
}
