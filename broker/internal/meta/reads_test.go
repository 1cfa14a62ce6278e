package meta

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestTopicsPageInAscendingByteOrder(t *testing.T) {
	tf := newTestFSM(t)
	for _, n := range []string{"b", "a", "B", "a.b", "a-b", "c"} {
		tf.must(OutcomeOK, OpCreateTopic, createCmd(n, 3, ""))
	}
	s := tf.store()
	names := func(ts []Topic) string {
		out := ""
		for _, t := range ts {
			out += t.Name + " "
		}
		return out
	}
	if got := names(s.Topics("", 0)); got != "B a a-b a.b b c " {
		t.Fatalf("all topics: %q", got)
	}
	if got := names(s.Topics("", 2)); got != "B a " {
		t.Fatalf("first page: %q", got)
	}
	if got := names(s.Topics("a", 2)); got != "a-b a.b " {
		t.Fatalf("page after \"a\": %q (must exclude \"a\" itself)", got)
	}
	if got := names(s.Topics("zzz", 10)); got != "" || s.Topics("zzz", 10) == nil {
		t.Fatalf("past the end: %q (must be empty, not nil)", got)
	}
	if s.TopicCount() != 6 {
		t.Fatalf("TopicCount %d", s.TopicCount())
	}
}

func TestSchemaAndAssignmentReadsAreOrdered(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 12, "n1"))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders2", 3, "n2")) // shares a name prefix
	for v := 1; v <= 3; v++ {
		tf.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))})
	}
	s := tf.store()
	as := s.Assignments("orders")
	if len(as) != 12 {
		t.Fatalf("%d assignments, want 12 (a prefix sibling must not leak in)", len(as))
	}
	for i, a := range as {
		if a.Partition != i {
			t.Fatalf("assignment %d has partition %d: not in partition order", i, a.Partition)
		}
	}
	if all := s.AllAssignments(); len(all) != 15 {
		t.Fatalf("AllAssignments %d, want 15", len(all))
	}
	if latest, ok := s.LatestSchema("orders"); !ok || latest.Version != 3 || string(latest.Doc) != `{"v":3}` {
		t.Fatalf("LatestSchema %+v %v", latest, ok)
	}
	if _, ok := s.LatestSchema("orders2"); ok {
		t.Fatal("LatestSchema of a topic without schemas")
	}
	if _, ok := s.Assignment("orders", -1); ok {
		t.Fatal("negative partition found")
	}
	if got := s.Schemas("none"); got == nil || len(got) != 0 {
		t.Fatalf("Schemas of an unknown topic %v: want empty, not nil", got)
	}
}
