package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

func TestCommandRoundTrip(t *testing.T) {
	data, err := encodeCommand(OpAttachChild, attachCmd{Child: "c", AttachSpec: AttachSpec{Parent: "p", Epoch: "e", DelayMs: 5, Offsets: []int64{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := decodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := cmd.payload.(*attachCmd)
	if !ok || cmd.op != OpAttachChild || got.Child != "c" || got.Parent != "p" || got.DelayMs != 5 || len(got.Offsets) != 2 {
		t.Fatalf("decoded %+v %+v", cmd, got)
	}
}

func TestDecodeCommandRejectsUnknownAndMalformed(t *testing.T) {
	for _, data := range []string{`{"o":99,"d":{}}`, `{"o":1}`, `{"o":1,"d":[1]}`, `nope`, `{"o":300,"d":{}}`} {
		if _, err := decodeCommand([]byte(data)); !errors.Is(err, errBadCommand) {
			t.Errorf("decodeCommand(%s) = %v, want errBadCommand", data, err)
		}
	}
}

// FuzzDecodeCommand feeds random bytes to Apply's decoder and to Apply itself: neither may
// panic, and a bad entry is answered as invalid without changing state.
func FuzzDecodeCommand(f *testing.F) {
	for op := uint8(1); op <= OpSetReplicas; op++ {
		p := newPayload(op)
		b, _ := json.Marshal(p)
		env, _ := json.Marshal(envelope{Op: op, Payload: b})
		f.Add(env)
	}
	seed, _ := encodeCommand(OpCreateTopic, createCmd("orders", 3, "n1"))
	f.Add(seed)
	seed, _ = encodeCommand(OpCreateTopic, createTopicCmd{Topic: newTopic("kid", 3), Attach: &AttachSpec{Parent: "orders", Epoch: "e"}})
	f.Add(seed)
	seed, _ = encodeCommand(OpCompleteMove, completeMoveCmd{Topic: "orders", Partition: 1, ExpectedOwner: "n1", Target: "n2"})
	f.Add(seed)
	seed, _ = encodeCommand(OpCreateTopic, replicated("rep", true))
	f.Add(seed)
	seed, _ = encodeCommand(OpSetISR, setISRCmd{Topic: "rep", Partition: 0, ExpectedISR: []string{"a", "b", "c"}, NewISR: []string{"a", "b"}})
	f.Add(seed)
	seed, _ = encodeCommand(OpElectLeader, electLeaderCmd{Topic: "rep", Partition: 0, NewLeader: "c", Reason: ElectUnclean})
	f.Add(seed)
	seed, _ = encodeCommand(OpSetReplicas, setReplicasCmd{Topic: "rep", Partition: 1, Replicas: []string{"a", "c", "d"}, ISR: []string{"a", "c"}})
	f.Add(seed)
	seed, _ = encodeCommand(OpSetReplicas, setReplicasCmd{Topic: "rep", Partition: 2, Replicas: []string{"a", "b", "c", "d"},
		ISR: []string{"a", "b", "c"}, TargetReplicas: []string{"d", "b", "c"}})
	f.Add(seed)
	f.Add([]byte(`{"o":25,"d":{"topic":"rep","p":2,"expected_epoch":0,"replicas":["a","b","c","d"],"isr":["a"],"target_replicas":["d","d",""]}}`))
	f.Add([]byte(`{"o":24,"d":{"topic":"rep","p":0,"expected_epoch":18446744073709551615,"new_leader":"a","reason":"dead"}}`))
	f.Add([]byte(`{"o":3,"d":{"name":"orders"}}`))
	f.Add([]byte(`{"o":1,"d":null}`))
	f.Add([]byte{0xff, 0x00})

	st, err := openFSM(f.TempDir(), nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.close() })
	var index uint64
	epochs := map[string]uint64{} // topic/partition → highest leader epoch seen
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, derr := decodeCommand(data)
		if derr == nil && cmd.payload == nil {
			t.Fatal("decoded a command without payload")
		}
		index++
		r := st.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}).(Result)
		if derr != nil && r.Outcome != OutcomeInvalid {
			t.Fatalf("undecodable entry answered %v", r.Outcome)
		}
		if st.applied() != index {
			t.Fatalf("applied %d after entry %d", st.applied(), index)
		}
		checkStoredAssignments(t, st, epochs)
	})
}

// checkStoredAssignments fails unless every stored assignment keeps the replica invariants
// and no leader epoch went backwards since the last call (epochs is updated). A deleted and
// re-created topic starts again at epoch 0, so a topic absent now forgets its epochs.
func checkStoredAssignments(t *testing.T, f *fsm, epochs map[string]uint64) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range (&Store{fsm: f}).AllAssignments() {
		key := fmt.Sprintf("%s/%d", a.Topic, a.Partition)
		seen[key] = true
		if why := replicaInvariant(a); why != "" {
			t.Fatalf("stored %+v: %s", a, why)
		}
		if a.LeaderEpoch < epochs[key] {
			t.Fatalf("%s: leader epoch went back from %d to %d", key, epochs[key], a.LeaderEpoch)
		}
		epochs[key] = a.LeaderEpoch
	}
	for key := range epochs {
		if !seen[key] {
			delete(epochs, key)
		}
	}
}
