package meta

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestCreateTopicRules(t *testing.T) {
	bad := func(mut func(c *createTopicCmd)) createTopicCmd {
		c := createCmd("orders", 3, "n1")
		mut(&c)
		return c
	}
	cases := []struct {
		name string
		cmd  createTopicCmd
		want Outcome
	}{
		{"bad name", bad(func(c *createTopicCmd) { c.Topic.Name = "a/b" }), OutcomeInvalid},
		{"dot name", bad(func(c *createTopicCmd) { c.Topic.Name = ".." }), OutcomeInvalid},
		{"zero partitions", bad(func(c *createTopicCmd) { c.Topic.Partitions = 0; c.Assignments = nil }), OutcomeInvalid},
		{"no incarnation", bad(func(c *createTopicCmd) { c.Topic.Incarnation = "" }), OutcomeInvalid},
		{"negative retention", bad(func(c *createTopicCmd) { c.Topic.RetentionMs = -1 }), OutcomeInvalid},
		{"assignment out of range", bad(func(c *createTopicCmd) { c.Assignments[0].Partition = 3 }), OutcomeInvalid},
		{"assignment twice", bad(func(c *createTopicCmd) { c.Assignments[1].Partition = 0 }), OutcomeInvalid},
		{"assignment with target", bad(func(c *createTopicCmd) { c.Assignments[0].Target = "n2" }), OutcomeInvalid},
		{"assignment without owner", bad(func(c *createTopicCmd) { c.Assignments[0].Owner = "" }), OutcomeInvalid},
		{"attach to missing parent", bad(func(c *createTopicCmd) { c.Attach = &AttachSpec{Parent: "nope", Epoch: "e"} }), OutcomeNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.must(tc.want, OpCreateTopic, tc.cmd)
			if n := tf.store().TopicCount(); n != 0 {
				t.Fatalf("refused create left %d topics", n)
			}
			if len(tf.store().Topics("", 0)) != 0 || len(tf.store().AllAssignments()) != 0 {
				t.Fatal("refused create left records behind")
			}
		})
	}
}

func TestCreateTopicExistingNameIsExists(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	c := createCmd("orders", 5, "")
	c.Topic.Incarnation = "ffffffffffffffff"
	r := tf.must(OutcomeExists, OpCreateTopic, c)
	if !errors.Is(r.errorOf(), ErrExists) {
		t.Fatalf("exists maps to %v", r.errorOf())
	}
	if got := tf.topic("orders"); got.Partitions != 3 || got.Incarnation == "ffffffffffffffff" {
		t.Fatalf("second create changed the record: %+v", got)
	}
}

func TestCreateTopicStoresAssignmentsSchemaAndNormalisesLinks(t *testing.T) {
	tf := newTestFSM(t)
	c := createCmd("orders", 3, "n1")
	c.Topic.Role, c.Topic.Parent, c.Topic.Children = RoleParent, "x", []string{"y"}
	c.Schema = json.RawMessage(`{ "type": "object" }`)
	r := tf.must(OutcomeOK, OpCreateTopic, c)
	got := tf.topic("orders")
	if got.Role != RoleStandalone || got.Parent != "" || got.Children != nil || got.SchemaVersion != 1 {
		t.Fatalf("stored topic %+v: want standalone without links, schema version 1", got)
	}
	if r.Topic.SchemaVersion != 1 || r.Version != 1 {
		t.Fatalf("result %+v", r)
	}
	if as := tf.store().Assignments("orders"); len(as) != 3 || as[2].Partition != 2 || as[2].Owner != "n1" {
		t.Fatalf("assignments %+v", as)
	}
	if s, ok := tf.store().LatestSchema("orders"); !ok || string(s.Doc) != `{"type":"object"}` {
		t.Fatalf("schema %+v %v: want compact doc", s, ok)
	}
	if len(tf.events) != 1 || tf.events[0].Op != OpCreateTopic || tf.events[0].Topic != "orders" ||
		tf.events[0].Incarnation != c.Topic.Incarnation {
		t.Fatalf("events %+v", tf.events)
	}
}

func TestCreateTopicAsChildIsAtomic(t *testing.T) {
	tf := newTestFSM(t)
	p := createCmd("orders", 3, "n1")
	p.Schema = json.RawMessage(`{"type":"object"}`)
	tf.must(OutcomeOK, OpCreateTopic, p)

	ok := createCmd("audit", 3, "n2")
	ok.Attach = &AttachSpec{Parent: "orders", Epoch: "67953471cc57a32a", Offsets: []int64{1, 2, 3}}
	r := tf.must(OutcomeOK, OpCreateTopic, ok)
	if r.Topic.Role != RoleChild || r.Topic.Parent != "orders" || r.Topic.SchemaVersion != 1 {
		t.Fatalf("child result %+v", r.Topic)
	}
	if got := tf.topic("orders"); got.Role != RoleParent || len(got.Children) != 1 {
		t.Fatalf("parent %+v", got)
	}

	mismatch := createCmd("bad", 3, "n2")
	mismatch.Schema = json.RawMessage(`{"type":"string"}`)
	mismatch.Attach = &AttachSpec{Parent: "orders", Epoch: "e2"}
	tf.must(OutcomeRefused, OpCreateTopic, mismatch)
	if _, found := tf.f.topic("bad"); found {
		t.Fatal("refused attach left the created topic behind")
	}
	if len(tf.store().Assignments("bad")) != 0 || len(tf.store().Schemas("bad")) != 0 {
		t.Fatal("refused attach left assignments or schemas behind")
	}
	if tf.store().TopicCount() != 2 {
		t.Fatalf("topic count %d, want 2", tf.store().TopicCount())
	}
}

func TestUpdateTopicRules(t *testing.T) {
	setup := func(t *testing.T) *testFSM {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
		tf.must(OutcomeOK, OpCreateTopic, createCmd("late", 3, "n1"))
		tf.must(OutcomeOK, OpAttachChild, attach("orders", "late", "e1", 86_400_000))
		return tf
	}
	upd := func(mut func(t *Topic)) updateTopicCmd {
		top := newTopic("orders", 3)
		mut(&top)
		return updateTopicCmd{Topic: top}
	}
	cases := []struct {
		name string
		cmd  updateTopicCmd
		want Outcome
	}{
		{"missing topic", upd(func(t *Topic) { t.Name = "nope" }), OutcomeNotFound},
		{"other incarnation", upd(func(t *Topic) { t.Incarnation = "0123456789abcdef" }), OutcomeNotFound},
		{"partition decrease", upd(func(t *Topic) { t.Partitions = 2 }), OutcomeInvalid},
		{"retention below delay child + 1h", upd(func(t *Topic) { t.RetentionMs = 86_400_000 }), OutcomeRefused},
		{"retention exactly delay + 1h", upd(func(t *Topic) { t.RetentionMs = 86_400_000 + MinRetentionMs }), OutcomeOK},
		{"retention forever", upd(func(t *Topic) { t.RetentionMs = 0 }), OutcomeOK},
		{"schema on attached child", updateTopicCmd{Topic: newTopic("late", 3), Schema: json.RawMessage(`{}`)}, OutcomeRefused},
		{"assign an old partition", updateTopicCmd{Topic: newTopic("orders", 4),
			Assignments: []Assignment{{Partition: 1, Owner: "n2"}}}, OutcomeExists},
		{"increase with placement", updateTopicCmd{Topic: newTopic("orders", 5),
			Assignments: []Assignment{{Partition: 3, Owner: "n2"}, {Partition: 4, Owner: "n3"}}}, OutcomeOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := setup(t)
			before := dump(t, tf.f)
			tf.must(tc.want, OpUpdateTopic, tc.cmd)
			if tc.want != OutcomeOK && len(dump(t, tf.f)) != len(before) {
				t.Fatal("refused update changed state")
			}
		})
	}
}

func TestUpdateTopicReplacesOnlyMutableFields(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("audit", 3, "n1"))
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e1", 0))
	before := tf.topic("orders")
	n := Topic{Name: "orders", Partitions: 6, RetentionMs: 0, VisibilityTimeoutMs: 5, MaxInFlightPerPartition: 6,
		MaxAckedAheadPerPartition: 7, CreatedAt: 1, Owner: "mallory", Incarnation: "", Role: RoleChild,
		Children: nil, Parent: "x", SchemaVersion: 9}
	r := tf.must(OutcomeOK, OpUpdateTopic, updateTopicCmd{Topic: n, Schema: json.RawMessage(`{"a":1}`)})
	got := tf.topic("orders")
	want := before
	want.Partitions, want.RetentionMs, want.VisibilityTimeoutMs = 6, 0, 5
	want.MaxInFlightPerPartition, want.MaxAckedAheadPerPartition, want.SchemaVersion = 6, 7, 1
	if got.Name != want.Name || got.Partitions != 6 || got.Owner != before.Owner || got.CreatedAt != before.CreatedAt ||
		got.Incarnation != before.Incarnation || got.Role != RoleParent || len(got.Children) != 1 ||
		got.Parent != "" || got.SchemaVersion != 1 || got.VisibilityTimeoutMs != 5 || got.RetentionMs != 0 {
		t.Fatalf("after update %+v, want %+v", got, want)
	}
	if r.Topic.SchemaVersion != 1 {
		t.Fatalf("result topic %+v", r.Topic)
	}
	if s := tf.store().Schemas("audit"); len(s) != 1 {
		t.Fatalf("schema in an update did not propagate to the child: %+v", s)
	}
}

func TestDeleteTopicRules(t *testing.T) {
	t.Run("parent detaches children, which keep their schemas", func(t *testing.T) {
		tf := newTestFSM(t)
		p := createCmd("orders", 3, "n1")
		p.Schema = json.RawMessage(`{"type":"object"}`)
		tf.must(OutcomeOK, OpCreateTopic, p)
		for _, c := range []string{"a1", "a2"} {
			tf.must(OutcomeOK, OpCreateTopic, createCmd(c, 3, "n1"))
			tf.must(OutcomeOK, OpAttachChild, attach("orders", c, "e-"+c, 0))
		}
		r := tf.must(OutcomeOK, OpDeleteTopic, deleteTopicCmd{Name: "orders"})
		if r.Topic.Name != "orders" || len(r.Topic.Children) != 2 {
			t.Fatalf("result carries %+v, want the deleted record", r.Topic)
		}
		for _, c := range []string{"a1", "a2"} {
			ch := tf.topic(c)
			if ch.Role != RoleStandalone || ch.Parent != "" || ch.AttachEpoch != "" || ch.SchemaVersion != 1 {
				t.Fatalf("child after parent delete %+v", ch)
			}
			if len(tf.store().Schemas(c)) != 1 {
				t.Fatalf("child %s lost its schema", c)
			}
		}
		if len(tf.store().Assignments("orders")) != 0 || len(tf.store().Schemas("orders")) != 0 {
			t.Fatal("delete left assignments or schemas")
		}
		if tf.store().TopicCount() != 2 {
			t.Fatalf("topic count %d", tf.store().TopicCount())
		}
	})
	t.Run("child is unlinked from its parent", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
		tf.must(OutcomeOK, OpCreateTopic, createCmd("audit", 3, ""))
		tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e", 0))
		tf.must(OutcomeOK, OpDeleteTopic, deleteTopicCmd{Name: "audit"})
		if p := tf.topic("orders"); p.Role != RoleStandalone || len(p.Children) != 0 {
			t.Fatalf("parent after its only child was deleted: %+v", p)
		}
		if e := tf.events[len(tf.events)-1]; e.Op != OpDeleteTopic || e.Parent != "orders" || e.Topic != "audit" {
			t.Fatalf("delete event %+v", e)
		}
	})
	t.Run("missing or other incarnation is not found", func(t *testing.T) {
		tf := newTestFSM(t)
		tf.must(OutcomeNotFound, OpDeleteTopic, deleteTopicCmd{Name: "orders"})
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
		tf.must(OutcomeNotFound, OpDeleteTopic, deleteTopicCmd{Name: "orders", Incarnation: "0000000000000000"})
		tf.must(OutcomeOK, OpDeleteTopic, deleteTopicCmd{Name: "orders", Incarnation: tf.topic("orders").Incarnation})
	})
	t.Run("recreate after delete starts empty", func(t *testing.T) {
		tf := newTestFSM(t)
		c := createCmd("orders", 3, "n1")
		c.Schema = json.RawMessage(`{}`)
		tf.must(OutcomeOK, OpCreateTopic, c)
		tf.must(OutcomeOK, OpDeleteTopic, deleteTopicCmd{Name: "orders"})
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
		if len(tf.store().Assignments("orders")) != 0 || len(tf.store().Schemas("orders")) != 0 {
			t.Fatal("recreated topic inherited old assignments or schemas")
		}
	})
}

func TestPutSchemaRules(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeNotFound, OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(`{}`)})
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("audit", 3, ""))
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e", 0))
	if r := tf.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(`{"v":1}`)}); r.Version != 1 {
		t.Fatalf("first version %d", r.Version)
	}
	if r := tf.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(`{"v":2}`)}); r.Version != 2 {
		t.Fatalf("second version %d", r.Version)
	}
	if r := tf.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(`{ "v" : 2 }`)}); r.Version != 2 {
		t.Fatalf("re-put of the latest doc made version %d, want 2 (idempotent)", r.Version)
	}
	if !sameHistory(tf.store().Schemas("orders"), rename(tf.store().Schemas("audit"), "orders")) {
		t.Fatal("schema versions did not propagate to the child")
	}
	if tf.topic("audit").SchemaVersion != 2 {
		t.Fatalf("child schema version %d", tf.topic("audit").SchemaVersion)
	}
	tf.must(OutcomeRefused, OpPutSchema, putSchemaCmd{Topic: "audit", Doc: json.RawMessage(`{"v":3}`)})
}

func rename(s []Schema, topic string) []Schema {
	for i := range s {
		s[i].Topic = topic
	}
	return s
}

func TestAssignPartitionRules(t *testing.T) {
	tf := newTestFSM(t)
	a := func(p int, owner string) assignCmd {
		return assignCmd{Assignment: Assignment{Topic: "orders", Partition: p, Owner: owner}}
	}
	tf.must(OutcomeNotFound, OpAssignPartition, a(0, "n1"))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	tf.must(OutcomeOK, OpAssignPartition, a(0, "n1"))
	tf.must(OutcomeOK, OpAssignPartition, a(0, "n1")) // same owner: idempotent
	tf.must(OutcomeExists, OpAssignPartition, a(0, "n2"))
	tf.must(OutcomeInvalid, OpAssignPartition, a(3, "n1"))
	tf.must(OutcomeInvalid, OpAssignPartition, a(-1, "n1"))
	tf.must(OutcomeInvalid, OpAssignPartition, a(1, ""))
	if got, _ := tf.store().Assignment("orders", 0); got.Owner != "n1" {
		t.Fatalf("owner %q after a refused re-assign", got.Owner)
	}
}
