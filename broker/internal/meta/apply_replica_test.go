package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// rawEntry is a log entry carrying data as it is (hand-built JSON of an older format).
func rawEntry(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// replicated returns the create command of an R = 3 topic whose partitions all live on a, b
// and c, led by a, with every replica in sync (epoch 0).
func replicated(name string, unclean bool) createTopicCmd {
	c := createTopicCmd{Topic: newTopic(name, 3)}
	c.Topic.ReplicationFactor, c.Topic.UncleanLeaderElection = 3, unclean
	for p := range 3 {
		c.Assignments = append(c.Assignments, Assignment{Topic: name, Partition: p, Replicas: []string{"a", "b", "c"}})
	}
	return c
}

// rawAssignment is the FSM's stored bytes of one assignment.
func (tf *testFSM) rawAssignment(topic string, p int) string {
	tf.t.Helper()
	v, closer, err := tf.f.db.Get(assignmentKey(topic, p))
	if err != nil {
		tf.t.Fatalf("assignment %s/%d: %v", topic, p, err)
	}
	defer closer.Close()
	return string(v)
}

func TestTopicReplicationSettingsDefaultWhenUnset(t *testing.T) {
	cases := []struct {
		rf, m         int
		wantRF, wantM int
	}{
		{0, 0, 1, 1}, {1, 0, 1, 1}, {2, 0, 2, 2}, {3, 0, 3, 2}, {5, 0, 5, 2}, {3, 3, 3, 3}, {3, 1, 3, 1},
	}
	for _, c := range cases {
		top := Topic{ReplicationFactor: c.rf, MinInsyncReplicas: c.m}
		if top.RF() != c.wantRF || top.MinISR() != c.wantM {
			t.Errorf("R=%d M=%d reads as R=%d M=%d, want %d %d", c.rf, c.m, top.RF(), top.MinISR(), c.wantRF, c.wantM)
		}
	}
}

func TestSingleReplicaAssignmentReadsAsItsOwner(t *testing.T) {
	a := Assignment{Topic: "t", Partition: 0, Owner: "n1"}
	if !slices.Equal(a.ReplicaSet(), []string{"n1"}) || !slices.Equal(a.InSync(), []string{"n1"}) || a.Leader() != "n1" {
		t.Fatalf("replicas %v isr %v leader %s", a.ReplicaSet(), a.InSync(), a.Leader())
	}
	full := Assignment{Topic: "t", Owner: "n1", Replicas: []string{"n1"}, ISR: []string{"n1"}}
	if got := canonical(full); got.Replicas != nil || got.ISR != nil {
		t.Fatalf("canonical single replica keeps %v %v", got.Replicas, got.ISR)
	}
	multi := canonical(Assignment{Owner: "b", Replicas: []string{"a", "b", "c"}, ISR: []string{"c", "b"}})
	if !slices.Equal(multi.ISR, []string{"b", "c"}) || !slices.Equal(multi.Replicas, []string{"a", "b", "c"}) {
		t.Fatalf("canonical multi: %+v", multi)
	}
}

// A record written before the replication fields existed (old log entry, old snapshot)
// reads as R = 1, M = 1, no unclean election, replicas = isr = [owner], epoch 0.
func TestOldFormatRecordsReadAsReplicationFactorOne(t *testing.T) {
	const oldTopic = `{"name":"orders","partitions":3,"retention_ms":604800000,"visibility_timeout_ms":30000,` +
		`"max_in_flight_per_partition":1024,"max_acked_ahead_per_partition":1024,"created_at":1700000000,` +
		`"incarnation":"00000000000000or","role":"standalone"}`
	const oldAssignment = `{"topic":"orders","partition":0,"owner_id":"n1"}`
	const oldMember = `{"id":"n1","addr":"h:1","cluster_addr":"h:2","status":"alive","last_heartbeat":5,"draining":false}`
	check := func(t *testing.T, tf *testFSM) {
		t.Helper()
		top := tf.topic("orders")
		if top.RF() != 1 || top.MinISR() != 1 || top.UncleanLeaderElection {
			t.Fatalf("old topic reads as R=%d M=%d unclean=%v", top.RF(), top.MinISR(), top.UncleanLeaderElection)
		}
		a, ok := tf.store().Assignment("orders", 0)
		if !ok || !slices.Equal(a.ReplicaSet(), []string{"n1"}) || !slices.Equal(a.InSync(), []string{"n1"}) || a.LeaderEpoch != 0 {
			t.Fatalf("old assignment reads as %+v (replicas %v isr %v)", a, a.ReplicaSet(), a.InSync())
		}
	}

	t.Run("log entry", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.index++
		data := []byte(`{"o":1,"d":{"topic":` + oldTopic + `,"assignments":[` + oldAssignment + `]}}`)
		if r := tf.f.Apply(rawEntry(tf.index, data)).(Result); r.Outcome != OutcomeOK {
			t.Fatalf("old create: %v %s", r.Outcome, r.Reason)
		}
		check(t, tf)
		// Stored exactly as before: none of the new fields is written for R = 1.
		if got := tf.rawAssignment("orders", 0); got != oldAssignment {
			t.Fatalf("stored %s, want %s", got, oldAssignment)
		}
		for _, field := range []string{"replication_factor", "min_insync_replicas", "unclean_leader_election"} {
			if raw := dump(t, tf.f)[string(topicKey("orders"))]; strings.Contains(raw, field) {
				t.Fatalf("R = 1 topic stored with %s: %s", field, raw)
			}
		}
	})

	t.Run("snapshot", func(t *testing.T) {
		stream := snapshotStream(map[string]string{
			string(topicKey("orders")):         oldTopic,
			string(assignmentKey("orders", 0)): oldAssignment,
			string(memberKey("n1")):            oldMember,
			string(keyApplied):                 `{"index":7,"term":1}`,
		})
		tf := newTestFSM(t)
		if err := tf.f.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
			t.Fatal(err)
		}
		check(t, tf)
		if m, ok := tf.store().Member("n1"); !ok || m.Rack != "" {
			t.Fatalf("old member reads as %+v", m)
		}
	})
}

// snapshotStream builds a snapshot stream (fsm_snapshot.go's format) from raw records.
func snapshotStream(recs map[string]string) []byte {
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b []byte
	for _, k := range keys {
		for _, f := range []string{k, recs[k]} {
			b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestCreateTopicReplicaRules(t *testing.T) {
	three := []string{"a", "b", "c"}
	cases := []struct {
		name   string
		rf, m  int
		a      Assignment
		want   Outcome
		wantAs Assignment // stored record when OK (Topic/Partition filled in)
	}{
		{"R=3 owner defaults to replicas[0], isr to replicas", 3, 0, Assignment{Replicas: three}, OutcomeOK,
			Assignment{Owner: "a", Replicas: three, ISR: three}},
		{"R=3 led by a later replica", 3, 0, Assignment{Owner: "b", Replicas: three, ISR: []string{"c", "b"}}, OutcomeOK,
			Assignment{Owner: "b", Replicas: three, ISR: []string{"b", "c"}}},
		{"R=1 full form is stored compact", 1, 0, Assignment{Owner: "a", Replicas: []string{"a"}, ISR: []string{"a"}}, OutcomeOK,
			Assignment{Owner: "a"}},
		{"R=1 owner only", 0, 0, Assignment{Owner: "a"}, OutcomeOK, Assignment{Owner: "a"}},
		{"R=3 without replicas", 3, 0, Assignment{Owner: "a"}, OutcomeInvalid, Assignment{}},
		{"R=3 with two replicas", 3, 0, Assignment{Replicas: []string{"a", "b"}}, OutcomeInvalid, Assignment{}},
		{"R=1 with two replicas", 1, 0, Assignment{Owner: "a", Replicas: []string{"a", "b"}}, OutcomeInvalid, Assignment{}},
		{"duplicate replica", 3, 0, Assignment{Replicas: []string{"a", "b", "a"}}, OutcomeInvalid, Assignment{}},
		{"owner not a replica", 3, 0, Assignment{Owner: "d", Replicas: three}, OutcomeInvalid, Assignment{}},
		{"isr without the owner", 3, 0, Assignment{Replicas: three, ISR: []string{"b", "c"}}, OutcomeInvalid, Assignment{}},
		{"isr beyond replicas", 3, 0, Assignment{Replicas: three, ISR: []string{"a", "d"}}, OutcomeInvalid, Assignment{}},
		{"epoch not 0", 3, 0, Assignment{Replicas: three, LeaderEpoch: 4}, OutcomeInvalid, Assignment{}},
		{"R above 5", 6, 0, Assignment{Replicas: []string{"a", "b", "c", "d", "e", "f"}}, OutcomeInvalid, Assignment{}},
		{"negative R", -1, 0, Assignment{Owner: "a"}, OutcomeInvalid, Assignment{}},
		{"M above R", 3, 4, Assignment{Replicas: three}, OutcomeInvalid, Assignment{}},
		{"M above an unset R", 0, 2, Assignment{Owner: "a"}, OutcomeInvalid, Assignment{}},
		{"M = R", 3, 3, Assignment{Replicas: three}, OutcomeOK, Assignment{Owner: "a", Replicas: three, ISR: three}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			c := createTopicCmd{Topic: newTopic("orders", 3)}
			c.Topic.ReplicationFactor, c.Topic.MinInsyncReplicas = tc.rf, tc.m
			c.Assignments = []Assignment{tc.a}
			tf.must(tc.want, OpCreateTopic, c)
			if tc.want != OutcomeOK {
				if _, ok := tf.f.topic("orders"); ok {
					t.Fatal("a refused create left a topic")
				}
				return
			}
			want := tc.wantAs
			want.Topic = "orders"
			if got, _ := tf.store().Assignment("orders", 0); !reflect.DeepEqual(got, want) {
				t.Fatalf("stored %+v, want %+v", got, want)
			}
		})
	}
}

func TestAssignPartitionChecksTheReplicaSet(t *testing.T) {
	tf := newTestFSM(t)
	c := replicated("orders", false)
	c.Assignments = c.Assignments[:1]
	tf.must(OutcomeOK, OpCreateTopic, c)
	tf.must(OutcomeInvalid, OpAssignPartition, assignCmd{Assignment: Assignment{Topic: "orders", Partition: 1, Owner: "a"}})
	r := tf.must(OutcomeOK, OpAssignPartition, assignCmd{Assignment: Assignment{Topic: "orders", Partition: 1,
		Replicas: []string{"b", "c", "a"}}})
	if r.Assignment.Owner != "b" || !slices.Equal(r.Assignment.InSync(), []string{"b", "c", "a"}) {
		t.Fatalf("assigned %+v", r.Assignment)
	}
}

func TestSetISRRules(t *testing.T) {
	abc, ab := []string{"a", "b", "c"}, []string{"a", "b"}
	cases := []struct {
		name      string
		epoch     uint64
		expected  []string
		next      []string
		want      Outcome
		wantISR   []string
		wantError error
	}{
		{"shrink", 0, abc, ab, OutcomeOK, ab, nil},
		{"shrink, expected in another order", 0, []string{"c", "a", "b"}, []string{"b", "a"}, OutcomeOK, ab, nil},
		{"stale epoch", 1, abc, ab, OutcomeStaleEpoch, abc, ErrStaleEpoch},
		{"expected isr is not the current one", 0, ab, []string{"a"}, OutcomeRefused, abc, ErrConflict},
		{"same isr again is already done", 0, ab, abc, OutcomeAlreadyDone, abc, nil},
		{"new isr without the leader", 0, abc, []string{"b", "c"}, OutcomeBadReplicaSet, abc, ErrBadReplicaSet},
		{"new isr beyond replicas", 0, abc, []string{"a", "d"}, OutcomeBadReplicaSet, abc, ErrBadReplicaSet},
		{"empty new isr", 0, abc, nil, OutcomeInvalid, abc, ErrInvalid},
		{"duplicate in new isr", 0, abc, []string{"a", "a"}, OutcomeInvalid, abc, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
			r := tf.must(tc.want, OpSetISR, setISRCmd{Topic: "orders", Partition: 1, LeaderEpoch: tc.epoch,
				ExpectedISR: tc.expected, NewISR: tc.next})
			if err := r.errorOf(); !errors.Is(err, tc.wantError) || (tc.wantError == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.wantError)
			}
			checkStoredAssignments(t, tf.f, map[string]uint64{})
			got, _ := tf.store().Assignment("orders", 1)
			if !slices.Equal(got.InSync(), tc.wantISR) || got.LeaderEpoch != 0 || got.Owner != "a" {
				t.Fatalf("after: %+v, want isr %v", got, tc.wantISR)
			}
		})
	}
	t.Run("expand back after a shrink", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
		tf.must(OutcomeOK, OpSetISR, setISRCmd{Topic: "orders", Partition: 0, ExpectedISR: abc, NewISR: []string{"a"}})
		r := tf.must(OutcomeOK, OpSetISR, setISRCmd{Topic: "orders", Partition: 0, ExpectedISR: []string{"a"}, NewISR: []string{"c", "a"}})
		if !slices.Equal(r.Assignment.ISR, []string{"a", "c"}) {
			t.Fatalf("expanded isr %v", r.Assignment.ISR)
		}
	})
	t.Run("missing assignment", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeNotFound, OpSetISR, setISRCmd{Topic: "orders", Partition: 0, ExpectedISR: abc, NewISR: ab})
	})
	t.Run("single replica: only [owner] is possible", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
		tf.must(OutcomeAlreadyDone, OpSetISR, setISRCmd{Topic: "orders", Partition: 0, ExpectedISR: []string{"n1"}, NewISR: []string{"n1"}})
		tf.must(OutcomeBadReplicaSet, OpSetISR, setISRCmd{Topic: "orders", Partition: 0, ExpectedISR: []string{"n1"}, NewISR: []string{"n1", "n2"}})
	})
}

func TestElectLeaderRules(t *testing.T) {
	cases := []struct {
		name      string
		unclean   bool     // topic allows unclean election
		isr       []string // ISR before (nil = all three)
		epoch     uint64
		leader    string
		reason    string
		want      Outcome
		wantOwner string
		wantEpoch uint64
		wantISR   []string
	}{
		{"dead leader → in-sync follower; it leaves the isr", false, nil, 0, "b", ElectDead, OutcomeOK, "b", 1, []string{"b", "c"}},
		{"preferred leader back", false, nil, 0, "a", ElectPreferred, OutcomeOK, "a", 1, []string{"a", "b", "c"}},
		{"stale epoch", false, nil, 3, "b", ElectDead, OutcomeStaleEpoch, "a", 0, []string{"a", "b", "c"}},
		{"out-of-sync replica", false, []string{"a", "b"}, 0, "c", ElectDead, OutcomeBadReplicaSet, "a", 0, []string{"a", "b"}},
		{"not a replica", false, nil, 0, "d", ElectShutdown, OutcomeBadReplicaSet, "a", 0, []string{"a", "b", "c"}},
		{"unclean not allowed", false, []string{"a", "b"}, 0, "c", ElectUnclean, OutcomeRefused, "a", 0, []string{"a", "b"}},
		{"unclean allowed", true, []string{"a", "b"}, 0, "c", ElectUnclean, OutcomeOK, "c", 1, []string{"c"}},
		{"unclean allowed, still not a replica", true, nil, 0, "d", ElectUnclean, OutcomeBadReplicaSet, "a", 0, []string{"a", "b", "c"}},
		{"unknown reason", false, nil, 0, "b", "whim", OutcomeInvalid, "a", 0, []string{"a", "b", "c"}},
		{"bad leader id", false, nil, 0, "", ElectDead, OutcomeInvalid, "a", 0, []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(OutcomeOK, OpCreateTopic, replicated("orders", tc.unclean))
			if tc.isr != nil {
				tf.must(OutcomeOK, OpSetISR, setISRCmd{Topic: "orders", Partition: 2, ExpectedISR: []string{"a", "b", "c"}, NewISR: tc.isr})
			}
			tf.must(tc.want, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 2, ExpectedEpoch: tc.epoch,
				NewLeader: tc.leader, Reason: tc.reason})
			checkStoredAssignments(t, tf.f, map[string]uint64{})
			got, _ := tf.store().Assignment("orders", 2)
			if got.Owner != tc.wantOwner || got.LeaderEpoch != tc.wantEpoch || !slices.Equal(got.InSync(), tc.wantISR) {
				t.Fatalf("after: %+v, want owner %s epoch %d isr %v", got, tc.wantOwner, tc.wantEpoch, tc.wantISR)
			}
			if !slices.Equal(got.ReplicaSet(), []string{"a", "b", "c"}) {
				t.Fatalf("an election changed the replicas: %v", got.ReplicaSet())
			}
		})
	}
	t.Run("a retried election is already done; a later one with its epoch is stale", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
		elect := electLeaderCmd{Topic: "orders", Partition: 0, ExpectedEpoch: 0, NewLeader: "b", Reason: ElectDead}
		tf.must(OutcomeOK, OpElectLeader, elect)
		tf.must(OutcomeAlreadyDone, OpElectLeader, elect)
		elect.NewLeader = "c"
		r := tf.must(OutcomeStaleEpoch, OpElectLeader, elect)
		if r.Assignment.Owner != "b" || r.Assignment.LeaderEpoch != 1 || !errors.Is(r.errorOf(), ErrStaleEpoch) {
			t.Fatalf("stale election answered %+v %v", r.Assignment, r.errorOf())
		}
	})
	t.Run("epoch bump fences the same leader's old term", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
		r := tf.must(OutcomeOK, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 0, NewLeader: "a", Reason: ElectDead})
		if r.Assignment.Owner != "a" || r.Assignment.LeaderEpoch != 1 {
			t.Fatalf("re-election: %+v", r.Assignment)
		}
		tf.must(OutcomeStaleEpoch, OpSetISR, setISRCmd{Topic: "orders", Partition: 0, LeaderEpoch: 0,
			ExpectedISR: []string{"a", "b", "c"}, NewISR: []string{"a"}})
	})
}

func TestSetReplicasRules(t *testing.T) {
	abc := []string{"a", "b", "c"}
	cases := []struct {
		name         string
		epoch        uint64
		replicas     []string
		isr          []string
		want         Outcome
		wantReplicas []string
		wantISR      []string
	}{
		{"add a destination out of sync", 0, []string{"a", "b", "c", "d"}, abc, OutcomeOK, []string{"a", "b", "c", "d"}, abc},
		{"drop a follower", 0, []string{"a", "c"}, []string{"c", "a"}, OutcomeOK, []string{"a", "c"}, []string{"a", "c"}},
		{"reorder the preferred leader", 0, []string{"b", "a", "c"}, abc, OutcomeOK, []string{"b", "a", "c"}, []string{"b", "a", "c"}},
		{"same set is already done", 0, abc, abc, OutcomeAlreadyDone, abc, abc},
		{"stale epoch", 2, []string{"a", "b"}, []string{"a", "b"}, OutcomeStaleEpoch, abc, abc},
		{"leader dropped", 0, []string{"b", "c"}, []string{"b", "c"}, OutcomeBadReplicaSet, abc, abc},
		{"isr without the leader", 0, abc, []string{"b", "c"}, OutcomeBadReplicaSet, abc, abc},
		{"isr beyond the new replicas", 0, []string{"a", "b"}, abc, OutcomeBadReplicaSet, abc, abc},
		{"a new replica declared in sync", 0, []string{"a", "b", "c", "d"}, []string{"a", "d"}, OutcomeBadReplicaSet, abc, abc},
		{"duplicate replica", 0, []string{"a", "a"}, []string{"a"}, OutcomeInvalid, abc, abc},
		{"empty isr", 0, abc, nil, OutcomeInvalid, abc, abc},
		{"too many replicas", 0, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, []string{"a"}, OutcomeInvalid, abc, abc},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
			tf.must(tc.want, OpSetReplicas, setReplicasCmd{Topic: "orders", Partition: 0, ExpectedEpoch: tc.epoch,
				Replicas: tc.replicas, ISR: tc.isr})
			checkStoredAssignments(t, tf.f, map[string]uint64{})
			got, _ := tf.store().Assignment("orders", 0)
			if !slices.Equal(got.ReplicaSet(), tc.wantReplicas) || !slices.Equal(got.InSync(), tc.wantISR) ||
				got.Owner != "a" || got.LeaderEpoch != 0 {
				t.Fatalf("after: %+v, want replicas %v isr %v", got, tc.wantReplicas, tc.wantISR)
			}
		})
	}
	t.Run("R=1 topics move by freeze and flip", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
		tf.must(OutcomeRefused, OpSetReplicas, setReplicasCmd{Topic: "orders", Partition: 0,
			Replicas: []string{"n1", "n2"}, ISR: []string{"n1"}})
	})
	t.Run("missing topic or assignment", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeNotFound, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: []string{"a"}, ISR: []string{"a"}})
		c := replicated("orders", false)
		c.Assignments = nil
		tf.must(OutcomeOK, OpCreateTopic, c)
		tf.must(OutcomeNotFound, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: []string{"a"}, ISR: []string{"a"}})
	})
}

// A replica move is recorded by op 25's target_replicas and ends when the replicas reach it or
// lose one of its nodes; a bad target is refused; records without one are stored as before.
func TestSetReplicasRecordsAReplicaMove(t *testing.T) {
	abc, abcd, dbc := []string{"a", "b", "c"}, []string{"a", "b", "c", "d"}, []string{"d", "b", "c"}
	start := func(t *testing.T) *testFSM {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
		return tf
	}
	target := func(tf *testFSM) []string {
		a, _ := tf.store().Assignment("orders", 0)
		return a.MoveTarget()
	}
	t.Run("recorded, kept by later steps, cleared when reached", func(t *testing.T) {
		tf := start(t)
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: abcd, ISR: abc, TargetReplicas: dbc})
		if got := target(tf); !slices.Equal(got, dbc) {
			t.Fatalf("target = %v, want %v", got, dbc)
		}
		if raw := tf.rawAssignment("orders", 0); !strings.Contains(raw, `"target_replicas":["d","b","c"]`) {
			t.Fatalf("stored %s", raw)
		}
		tf.must(OutcomeAlreadyDone, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: abcd, ISR: abc, TargetReplicas: dbc})
		tf.must(OutcomeOK, OpSetISR, setISRCmd{Topic: "orders", ExpectedISR: abc, NewISR: abcd})
		tf.must(OutcomeOK, OpElectLeader, electLeaderCmd{Topic: "orders", NewLeader: "d", Reason: ElectReassign})
		if got := target(tf); !slices.Equal(got, dbc) {
			t.Fatalf("target after ops 23 and 24 = %v", got)
		}
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", ExpectedEpoch: 1, Replicas: dbc, ISR: dbc})
		if got := target(tf); got != nil {
			t.Fatalf("target after the drop = %v", got)
		}
		if raw := tf.rawAssignment("orders", 0); strings.Contains(raw, "target_replicas") {
			t.Fatalf("stored %s", raw)
		}
		checkStoredAssignments(t, tf.f, map[string]uint64{})
	})
	t.Run("a target equal to the replicas clears it", func(t *testing.T) {
		tf := start(t)
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: abcd, ISR: abc, TargetReplicas: dbc})
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: abcd, ISR: abc, TargetReplicas: abcd})
		if got := target(tf); got != nil {
			t.Fatalf("target = %v", got)
		}
	})
	t.Run("dropping a destination ends it", func(t *testing.T) {
		tf := start(t)
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: abcd, ISR: abc, TargetReplicas: dbc})
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: abc, ISR: abc})
		if got := target(tf); got != nil {
			t.Fatalf("target = %v", got)
		}
	})
	for _, tc := range []struct {
		name     string
		replicas []string
		target   []string
		want     Outcome
	}{
		{"not RF replicas", abcd, []string{"d", "b"}, OutcomeBadReplicaSet},
		{"outside the replicas", abcd, []string{"e", "b", "c"}, OutcomeBadReplicaSet},
		{"duplicates", abcd, []string{"d", "d", "c"}, OutcomeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf := start(t)
			tf.must(tc.want, OpSetReplicas, setReplicasCmd{Topic: "orders", Replicas: tc.replicas, ISR: abc, TargetReplicas: tc.target})
			if got := target(tf); got != nil {
				t.Fatalf("target = %v", got)
			}
		})
	}
	t.Run("a new assignment has none", func(t *testing.T) {
		tf := newTestFSM(t)
		c := replicated("orders", false)
		c.Assignments[1].TargetReplicas = dbc
		tf.must(OutcomeInvalid, OpCreateTopic, c)
	})
}

// The R = 1 move flip is a leader change: it bumps the epoch and the single replica follows
// the owner; the record stays in the single-replica form.
func TestMoveFlipBumpsTheLeaderEpoch(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	tf.must(OutcomeOK, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "n2", ExpectedOwner: "n1"})
	r := tf.must(OutcomeOK, OpCompleteMove, completeMoveCmd{Topic: "orders", Partition: 0, ExpectedOwner: "n1", Target: "n2"})
	got, _ := tf.store().Assignment("orders", 0)
	if !reflect.DeepEqual(r.Assignment, got) || got.LeaderEpoch != 1 ||
		!slices.Equal(got.ReplicaSet(), []string{"n2"}) || !slices.Equal(got.InSync(), []string{"n2"}) {
		t.Fatalf("after the flip: %+v", got)
	}
	if raw := tf.rawAssignment("orders", 0); raw != `{"topic":"orders","partition":0,"owner_id":"n2","leader_epoch":1}` {
		t.Fatalf("stored %s", raw)
	}
	tf.must(OutcomeAlreadyDone, OpCompleteMove, completeMoveCmd{Topic: "orders", Partition: 0, ExpectedOwner: "n1", Target: "n2"})
	if got, _ := tf.store().Assignment("orders", 0); got.LeaderEpoch != 1 {
		t.Fatalf("a retried flip bumped the epoch again: %d", got.LeaderEpoch)
	}
}

func TestReplicatedPartitionsDoNotMoveByTarget(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
	tf.must(OutcomeRefused, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "d", ExpectedOwner: "a"})
}

func TestRemoveMemberRefusedWhileItHoldsAReplica(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpMemberJoin, member("c", 1))
	tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
	tf.must(OutcomeRefused, OpRemoveMember, memberIDCmd{ID: "c"})
	for p := range 3 {
		tf.must(OutcomeOK, OpSetReplicas, setReplicasCmd{Topic: "orders", Partition: p, Replicas: []string{"a", "b"}, ISR: []string{"a", "b"}})
	}
	tf.must(OutcomeOK, OpRemoveMember, memberIDCmd{ID: "c"})
}

func TestMemberRackIsStoredAndARackChangeBumpsMembers(t *testing.T) {
	tf := newTestFSM(t)
	m := member("n1", 1)
	m.Member.Rack = "zone-a"
	tf.must(OutcomeOK, OpMemberJoin, m)
	v := tf.store().MembersVersion()
	if got, _ := tf.store().Member("n1"); got.Rack != "zone-a" {
		t.Fatalf("rack %q", got.Rack)
	}
	tf.must(OutcomeOK, OpMemberJoin, m)
	if tf.store().MembersVersion() != v {
		t.Fatal("an unchanged re-join bumped members")
	}
	m.Member.Rack = "zone-b"
	tf.must(OutcomeOK, OpMemberJoin, m)
	if tf.store().MembersVersion() == v {
		t.Fatal("a rack change did not bump members")
	}
}

func TestReplicationOutcomesMapToSentinels(t *testing.T) {
	for _, c := range []struct {
		o    Outcome
		want error
	}{{OutcomeStaleEpoch, ErrStaleEpoch}, {OutcomeBadReplicaSet, ErrBadReplicaSet}} {
		r := Result{Outcome: c.o, Reason: "x"}
		if err := r.Err(); !errors.Is(err, c.want) || !errors.Is(err, ErrConflict) {
			t.Errorf("%v maps to %v", c.o, err)
		}
		if casOf(c.o) != CASRefused || success(c.o) {
			t.Errorf("%v: cas %v success %v", c.o, casOf(c.o), success(c.o))
		}
		if strings.HasPrefix(c.o.String(), "outcome(") {
			t.Errorf("%v has no name", uint8(c.o))
		}
	}
}

func TestSnapshotRoundTripKeepsReplicaSets(t *testing.T) {
	src := newTestFSM(t)
	src.must(OutcomeOK, OpCreateTopic, replicated("orders", true))
	src.must(OutcomeOK, OpSetISR, setISRCmd{Topic: "orders", Partition: 1, ExpectedISR: []string{"a", "b", "c"}, NewISR: []string{"a", "c"}})
	src.must(OutcomeOK, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 1, NewLeader: "c", Reason: ElectDead})
	m := member("a", 1)
	m.Member.Rack = "r1"
	src.must(OutcomeOK, OpMemberJoin, m)

	dst := newTestFSM(t)
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, src.f)))); err != nil {
		t.Fatal(err)
	}
	sameState(t, src.f, dst.f)
	a, _ := dst.store().Assignment("orders", 1)
	want := Assignment{Topic: "orders", Partition: 1, Owner: "c", Replicas: []string{"a", "b", "c"}, LeaderEpoch: 1, ISR: []string{"c"}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("restored %+v, want %+v", a, want)
	}
	top := dst.topic("orders")
	if top.RF() != 3 || top.MinISR() != 2 || !top.UncleanLeaderElection {
		t.Fatalf("restored topic R=%d M=%d unclean=%v", top.RF(), top.MinISR(), top.UncleanLeaderElection)
	}
	if got, _ := dst.store().Member("a"); got.Rack != "r1" {
		t.Fatalf("restored rack %q", got.Rack)
	}
}

func TestReplicationProposalsReturnVerdicts(t *testing.T) {
	s := openSingle(t, t.TempDir(), nil)
	ctx := ctxT(t)
	c := replicated("orders", false)
	if _, err := s.CreateTopicWith(ctx, TopicCreate{Topic: c.Topic, Assignments: c.Assignments}); err != nil {
		t.Fatal(err)
	}
	abc := []string{"a", "b", "c"}
	res, a, err := s.SetISR(ctx, "orders", 0, 0, abc, []string{"a", "b"})
	if err != nil || res != CASDone || !slices.Equal(a.ISR, []string{"a", "b"}) {
		t.Fatalf("SetISR = %v %+v %v", res, a, err)
	}
	res, a, err = s.ElectLeader(ctx, "orders", 0, 0, "b", ElectShutdown)
	if err != nil || res != CASDone || a.Owner != "b" || a.LeaderEpoch != 1 {
		t.Fatalf("ElectLeader = %v %+v %v", res, a, err)
	}
	res, a, err = s.SetReplicas(ctx, "orders", 0, 0, []string{"b", "a"}, []string{"b"})
	if !errors.Is(err, ErrStaleEpoch) || !errors.Is(err, ErrConflict) || res != CASRefused || a.LeaderEpoch != 1 {
		t.Fatalf("stale SetReplicas = %v %+v %v", res, a, err)
	}
	res, _, err = s.SetReplicas(ctx, "orders", 0, 1, []string{"c", "a"}, []string{"a"})
	if !errors.Is(err, ErrBadReplicaSet) || res != CASRefused {
		t.Fatalf("SetReplicas without the leader = %v %v", res, err)
	}
	if res, _, err = s.SetISR(ctx, "orders", 9, 0, abc, abc); !errors.Is(err, ErrNotFound) || res != CASNotFound {
		t.Fatalf("SetISR of a missing partition = %v %v", res, err)
	}
	if _, _, err = s.ElectLeader(context.Background(), "orders", 0, 1, "b", "nope"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ElectLeader with a bad reason = %v", err)
	}
}

func TestReplicaInvariantCatchesBrokenRecords(t *testing.T) {
	cases := []struct {
		a    Assignment
		want bool // holds
	}{
		{Assignment{Owner: "a"}, true},
		{Assignment{Owner: "a", Replicas: []string{"a", "b"}, ISR: []string{"a"}}, true},
		{Assignment{Owner: "a", Replicas: []string{"a"}, ISR: []string{"a"}}, false},           // not canonical
		{Assignment{Owner: "c", Replicas: []string{"a", "b"}, ISR: []string{"a"}}, false},      // owner outside
		{Assignment{Owner: "a", Replicas: []string{"a", "b"}, ISR: []string{"a", "c"}}, false}, // isr beyond
		{Assignment{Owner: "a", Replicas: []string{"a", "a"}, ISR: []string{"a"}}, false},      // duplicate
		{Assignment{Owner: "a", Replicas: []string{"a", "b"}, ISR: []string{"b", "a"}}, false}, // order
	}
	for _, c := range cases {
		if got := replicaInvariant(c.a) == ""; got != c.want {
			t.Errorf("%+v: holds %v, want %v (%s)", c.a, got, c.want, replicaInvariant(c.a))
		}
	}
}

func TestElectLeaderRefusesDuringASingleReplicaMoveAndForMissingRecords(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeNotFound, OpElectLeader, electLeaderCmd{Topic: "orders", NewLeader: "n1", Reason: ElectDead})
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	tf.must(OutcomeNotFound, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 7, NewLeader: "n1", Reason: ElectDead})
	tf.must(OutcomeOK, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "n2", ExpectedOwner: "n1"})
	tf.must(OutcomeRefused, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 0, NewLeader: "n1", Reason: ElectDead})
	// R = 1 without a move: the only in-sync replica is the owner; re-electing it fences its term.
	r := tf.must(OutcomeOK, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 1, NewLeader: "n1", Reason: ElectDead})
	if r.Assignment.LeaderEpoch != 1 || r.Assignment.Replicas != nil {
		t.Fatalf("R = 1 re-election stored %+v", r.Assignment)
	}
	tf.must(OutcomeBadReplicaSet, OpElectLeader, electLeaderCmd{Topic: "orders", Partition: 1, ExpectedEpoch: 1, NewLeader: "n2", Reason: ElectDead})
}

// Op 2 takes only the mutable fields from its command: an update written by a caller that
// knows nothing of replication leaves the stored settings alone.
func TestUpdateTopicKeepsTheReplicationSettings(t *testing.T) {
	tf := newTestFSM(t)
	c := replicated("orders", true)
	c.Topic.MinInsyncReplicas = 3
	tf.must(OutcomeOK, OpCreateTopic, c)
	upd := newTopic("orders", 4)
	upd.RetentionMs = 0
	tf.must(OutcomeOK, OpUpdateTopic, updateTopicCmd{Topic: upd,
		Assignments: []Assignment{{Topic: "orders", Partition: 3, Replicas: []string{"c", "a", "b"}}}})
	top := tf.topic("orders")
	if top.RF() != 3 || top.MinISR() != 3 || !top.UncleanLeaderElection || top.Partitions != 4 {
		t.Fatalf("after update: %+v", top)
	}
	tf.must(OutcomeInvalid, OpUpdateTopic, updateTopicCmd{Topic: newTopic("orders", 5),
		Assignments: []Assignment{{Topic: "orders", Partition: 4, Owner: "a"}}})
}

// Op 2 with replication set replaces R, M and unclean election; R moves only within 2 … 5,
// M stays within 1 … R, and the assignments are left to the controller's reassignment.
func TestUpdateTopicAltersTheReplicationSettings(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, replicated("orders", false))
	upd := tf.topic("orders")
	upd.ReplicationFactor, upd.MinInsyncReplicas, upd.UncleanLeaderElection = 2, 2, true
	tf.must(OutcomeOK, OpUpdateTopic, updateTopicCmd{Topic: upd, Replication: true})
	top := tf.topic("orders")
	if top.RF() != 2 || top.MinISR() != 2 || !top.UncleanLeaderElection {
		t.Fatalf("after alter: %+v", top)
	}
	if a, _ := tf.store().Assignment("orders", 0); len(a.ReplicaSet()) != 3 {
		t.Fatalf("op 2 changed a replica set: %+v", a)
	}
	upd.MinInsyncReplicas = 3
	tf.must(OutcomeInvalid, OpUpdateTopic, updateTopicCmd{Topic: upd, Replication: true})
	upd.ReplicationFactor, upd.MinInsyncReplicas = 1, 1
	tf.must(OutcomeRefused, OpUpdateTopic, updateTopicCmd{Topic: upd, Replication: true})
	upd.ReplicationFactor = 6
	tf.must(OutcomeInvalid, OpUpdateTopic, updateTopicCmd{Topic: upd, Replication: true})

	tf.must(OutcomeOK, OpCreateTopic, createCmd("single", 1, "a"))
	one := tf.topic("single")
	one.ReplicationFactor = 3
	tf.must(OutcomeRefused, OpUpdateTopic, updateTopicCmd{Topic: one, Replication: true})
	one.ReplicationFactor, one.MinInsyncReplicas = 1, 1
	tf.must(OutcomeOK, OpUpdateTopic, updateTopicCmd{Topic: one, Replication: true})
	if got := tf.topic("single"); got.ReplicationFactor != 0 || got.RF() != 1 {
		t.Fatalf("R = 1 must be stored as 0: %+v", got)
	}
}
