package meta

import (
	"errors"
	"reflect"
	"testing"
)

// CL-8: CompleteMove is a compare-and-swap.
func TestCompleteMoveCAS(t *testing.T) {
	cases := []struct {
		name          string
		owner, target string // state before
		expectedOwner string
		flipTo        string
		want          Outcome
		wantOwner     string
		wantTarget    string
	}{
		{"flip", "n1", "n2", "n1", "n2", OutcomeOK, "n2", ""},
		{"owner is not the expected one", "n3", "n2", "n1", "n2", OutcomeRefused, "n3", "n2"},
		{"target is another node", "n1", "n4", "n1", "n2", OutcomeRefused, "n1", "n4"},
		{"no target set", "n1", "", "n1", "n2", OutcomeRefused, "n1", ""},
		{"already flipped to the proposer", "n2", "", "n1", "n2", OutcomeAlreadyDone, "n2", ""},
		{"empty target never flips", "n1", "", "n1", "", OutcomeRefused, "n1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, tc.owner))
			if tc.target != "" {
				tf.must(OutcomeOK, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 1, Target: tc.target, ExpectedOwner: tc.owner})
			}
			r := tf.must(tc.want, OpCompleteMove, completeMoveCmd{Topic: "orders", Partition: 1, ExpectedOwner: tc.expectedOwner, Target: tc.flipTo})
			got, _ := tf.store().Assignment("orders", 1)
			if got.Owner != tc.wantOwner || got.Target != tc.wantTarget {
				t.Fatalf("after: owner %q target %q, want %q %q", got.Owner, got.Target, tc.wantOwner, tc.wantTarget)
			}
			if !reflect.DeepEqual(r.Assignment, got) {
				t.Fatalf("result carries %+v, want the current record %+v", r.Assignment, got)
			}
		})
	}
	t.Run("missing assignment is not found", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
		r := tf.must(OutcomeNotFound, OpCompleteMove, completeMoveCmd{Topic: "orders", Partition: 0, ExpectedOwner: "n1", Target: "n2"})
		if casOf(r.Outcome) != CASNotFound || !errors.Is(r.errorOf(), ErrNotFound) {
			t.Fatalf("not found maps to %v / %v", casOf(r.Outcome), r.errorOf())
		}
	})
}

func TestSetAssignmentTargetCAS(t *testing.T) {
	cases := []struct {
		name          string
		target        string // preset target
		newTarget     string
		expectedOwner string
		want          Outcome
		wantTarget    string
	}{
		{"set", "", "n2", "n1", OutcomeOK, "n2"},
		{"same target again", "n2", "n2", "n1", OutcomeAlreadyDone, "n2"},
		{"other target already set", "n3", "n2", "n1", OutcomeRefused, "n3"},
		{"owner mismatch", "", "n2", "n9", OutcomeRefused, ""},
		{"target is the owner", "", "n1", "n1", OutcomeRefused, ""},
		{"clearing is not op 15", "", "", "n1", OutcomeInvalid, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
			if tc.target != "" {
				tf.must(OutcomeOK, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: tc.target, ExpectedOwner: "n1"})
			}
			tf.must(tc.want, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: tc.newTarget, ExpectedOwner: tc.expectedOwner})
			if got, _ := tf.store().Assignment("orders", 0); got.Owner != "n1" || got.Target != tc.wantTarget {
				t.Fatalf("after: %+v, want owner n1 target %q", got, tc.wantTarget)
			}
		})
	}
}

func TestAbortMoveClearsOnlyTheExpectedTarget(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	tf.must(OutcomeNotFound, OpAbortMove, abortMoveCmd{Topic: "orders", Partition: 7, ExpectedTarget: "n2"})
	tf.must(OutcomeOK, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "n2", ExpectedOwner: "n1"})
	v := tf.store().AssignmentsVersion("orders")
	r := tf.must(OutcomeNoop, OpAbortMove, abortMoveCmd{Topic: "orders", Partition: 0, ExpectedTarget: "n3"})
	if r.Assignment.Target != "n2" || tf.store().AssignmentsVersion("orders") != v {
		t.Fatalf("mismatched abort changed something: %+v", r.Assignment)
	}
	tf.must(OutcomeOK, OpAbortMove, abortMoveCmd{Topic: "orders", Partition: 0, ExpectedTarget: "n2"})
	if got, _ := tf.store().Assignment("orders", 0); got.Target != "" || got.Owner != "n1" {
		t.Fatalf("after abort %+v", got)
	}
	if tf.store().AssignmentsVersion("orders") <= v {
		t.Fatal("abort did not bump the assignments version")
	}
	tf.must(OutcomeNoop, OpAbortMove, abortMoveCmd{Topic: "orders", Partition: 0, ExpectedTarget: ""})
}
