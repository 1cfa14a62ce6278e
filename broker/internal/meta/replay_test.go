package meta

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// workload returns n command entries touching every domain (indexes 1…n).
func workload(t *testing.T, n int) []*raft.Log {
	t.Helper()
	var cmds []struct {
		op uint8
		p  any
	}
	add := func(op uint8, p any) {
		cmds = append(cmds, struct {
			op uint8
			p  any
		}{op, p})
	}
	add(OpMemberJoin, member("n1", 1))
	add(OpMemberJoin, member("n2", 1))
	add(OpCreateUser, userCmd{User: User{Username: "alice"}})
	for i := 0; len(cmds) < n; i++ {
		name := fmt.Sprintf("t%02d", i)
		add(OpCreateTopic, createCmd(name, 3, "n1"))
		add(OpPutSchema, putSchemaCmd{Topic: name, Doc: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i))})
		add(OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: int64(10 + i)})
		add(OpSetAssignmentTarget, setTargetCmd{Topic: name, Partition: 0, Target: "n2", ExpectedOwner: "n1"})
		add(OpCompleteMove, completeMoveCmd{Topic: name, Partition: 0, ExpectedOwner: "n1", Target: "n2"})
		if i%2 == 1 {
			add(OpDeleteTopic, deleteTopicCmd{Name: fmt.Sprintf("t%02d", i-1)})
		}
	}
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = entry(t, uint64(i+1), cmds[i].op, cmds[i].p)
	}
	return out
}

// CL-2: after a crash that loses pebble's unsynced tail, Raft's replay re-applies exactly the
// lost entries (entries ≤ m/applied are skipped, even non-idempotent ones) and the state
// equals a fresh apply of all N.
func TestReplayAfterCrashSkipsAppliedAndConverges(t *testing.T) {
	const n, synced = 40, 17
	logs := workload(t, n)
	fs := vfs.NewCrashableMem()
	before := openTestFSM(t, "fsm", fs)
	results := make([]Result, n)
	for i, l := range logs {
		results[i] = before.f.Apply(l).(Result)
		if l.Index == synced {
			snap, err := before.f.Snapshot() // syncs m/applied = synced (§2.3 rule 4)
			if err != nil {
				t.Fatal(err)
			}
			snap.Release()
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // only what was synced survives

	after := openTestFSM(t, "fsm", crashed)
	if got := after.f.applied(); got != synced {
		t.Fatalf("m/applied after crash = %d, want %d (the unsynced tail must be lost for this test to mean anything)", got, synced)
	}
	for i, l := range logs { // raft re-delivers from its last snapshot or log start
		r := after.f.Apply(l).(Result)
		if l.Index <= synced {
			if r.Outcome != OutcomeSkipped {
				t.Fatalf("entry %d ≤ m/applied: outcome %v, want skipped", l.Index, r.Outcome)
			}
			continue
		}
		if r.Outcome != results[i].Outcome {
			t.Fatalf("entry %d replayed with outcome %v, originally %v", l.Index, r.Outcome, results[i].Outcome)
		}
	}
	fresh := newTestFSM(t)
	for _, l := range logs {
		fresh.f.Apply(l)
	}
	sameState(t, after.f, fresh.f)
	sameState(t, after.f, before.f)
	if after.f.applied() != n || after.store().TopicCount() != fresh.store().TopicCount() {
		t.Fatalf("applied %d topics %d, want %d / %d", after.f.applied(), after.store().TopicCount(), n, fresh.store().TopicCount())
	}
}

// A refused or undecodable entry still advances m/applied, so replay never re-judges it.
func TestRefusedAndUndecodableEntriesAdvanceApplied(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeNotFound, OpDeleteTopic, deleteTopicCmd{Name: "nope"})
	if tf.f.applied() != 1 {
		t.Fatalf("applied %d after a refused entry", tf.f.applied())
	}
	r := tf.f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("garbage")}).(Result)
	if r.Outcome != OutcomeInvalid || tf.f.applied() != 2 {
		t.Fatalf("garbage entry: %v, applied %d", r.Outcome, tf.f.applied())
	}
	if len(tf.events) != 0 {
		t.Fatalf("events for entries that changed nothing: %+v", tf.events)
	}
}
