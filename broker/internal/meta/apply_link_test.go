package meta

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestAttachChildInvariants(t *testing.T) {
	// Fixture: parent "orders" (retention 7 d) with child "audit"; "grand" is standalone;
	// "other" is a parent of "kid".
	setup := func(t *testing.T) *testFSM {
		tf := newTestFSM(t)
		for _, n := range []string{"orders", "audit", "grand", "other", "kid", "free"} {
			tf.must(OutcomeOK, OpCreateTopic, createCmd(n, 3, ""))
		}
		tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e-audit", 0))
		tf.must(OutcomeOK, OpAttachChild, attach("other", "kid", "e-kid", 0))
		return tf
	}
	week := DefaultRetentionMs
	withOffsets := func(c attachCmd, o ...int64) attachCmd { c.Offsets = o; return c }
	cases := []struct {
		name string
		cmd  attachCmd
		want Outcome
	}{
		{"attach ok", attach("orders", "free", "e1", 0), OutcomeOK},
		{"missing parent", attach("nope", "free", "e1", 0), OutcomeNotFound},
		{"missing child", attach("orders", "nope", "e1", 0), OutcomeNotFound},
		{"own child", attach("free", "free", "e1", 0), OutcomeInvalid},
		{"no epoch", attach("orders", "free", "", 0), OutcomeInvalid},
		{"negative delay", attach("orders", "free", "e1", -1), OutcomeInvalid},
		{"delay over one year", attach("orders", "free", "e1", MaxDelayMs+1), OutcomeInvalid},
		{"too many attach offsets", withOffsets(attach("orders", "free", "e1", 0), 1, 2, 3, 4), OutcomeInvalid},
		{"negative attach offset", withOffsets(attach("orders", "free", "e1", 0), 0, -1), OutcomeInvalid},
		{"child of a child", attach("audit", "free", "e1", 0), OutcomeRefused},
		{"parent as a child", attach("orders", "other", "e1", 0), OutcomeRefused},
		{"child already has another parent", attach("orders", "kid", "e1", 0), OutcomeRefused},
		{"already attached, new epoch", attach("orders", "audit", "e2", 0), OutcomeRefused},
		{"already attached, same epoch (retry)", attach("orders", "audit", "e-audit", 0), OutcomeOK},
		{"parent retention below delay + 1h", attach("orders", "free", "e1", week-MinRetentionMs+1), OutcomeRefused},
		{"parent retention exactly delay + 1h", attach("orders", "free", "e1", week-MinRetentionMs), OutcomeOK},
		{"one-year delay needs longer retention", attach("orders", "free", "e1", MaxDelayMs), OutcomeRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := setup(t)
			before := dump(t, tf.f)
			tf.must(tc.want, OpAttachChild, tc.cmd)
			if tc.want != OutcomeOK && fmt.Sprint(dump(t, tf.f)) != fmt.Sprint(before) {
				t.Fatal("refused attach changed state")
			}
		})
	}
}

func TestAttachSetsLinkFieldsAndRoles(t *testing.T) {
	tf := newTestFSM(t)
	p := createCmd("orders", 3, "")
	p.Topic.RetentionMs = 0 // keep forever: any delay fits
	tf.must(OutcomeOK, OpCreateTopic, p)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("late", 3, ""))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("audit", 3, ""))
	c := attach("orders", "late", "67953471cc57a32a", MaxDelayMs)
	c.Offsets = []int64{5, 0, 9}
	r := tf.must(OutcomeOK, OpAttachChild, c)
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e2", 0))
	late := tf.topic("late")
	if late.Role != RoleChild || late.Parent != "orders" || late.AttachEpoch != "67953471cc57a32a" ||
		late.FanoutDelayMs != MaxDelayMs || fmt.Sprint(late.AttachOffsets) != "[5 0 9]" {
		t.Fatalf("child after attach %+v", late)
	}
	parent := tf.topic("orders")
	if parent.Role != RoleParent || fmt.Sprint(parent.Children) != "[late audit]" {
		t.Fatalf("parent after attach %+v (children must keep attach order)", parent)
	}
	if r.Topic.Name != "orders" {
		t.Fatalf("attach result carries %q, want the parent", r.Topic.Name)
	}
	e := tf.events[len(tf.events)-1]
	if e.Op != OpAttachChild || e.Topic != "audit" || e.Parent != "orders" {
		t.Fatalf("attach event %+v", e)
	}
}

func TestAttach109thChildRefused(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, ""))
	for i := 0; i <= MaxChildren; i++ {
		name := fmt.Sprintf("c%03d", i)
		tf.must(OutcomeOK, OpCreateTopic, createCmd(name, 3, ""))
		want := OutcomeOK
		if i == MaxChildren {
			want = OutcomeRefused
		}
		tf.must(want, OpAttachChild, attach("orders", name, "e"+name, 0))
	}
	if n := len(tf.topic("orders").Children); n != MaxChildren {
		t.Fatalf("%d children, want %d", n, MaxChildren)
	}
}

func TestAttachSchemaAdoption(t *testing.T) {
	withSchema := func(name string, docs ...string) []createOrSchema {
		out := []createOrSchema{{create: name}}
		for _, d := range docs {
			out = append(out, createOrSchema{topic: name, doc: d})
		}
		return out
	}
	cases := []struct {
		name        string
		parentDocs  []string
		childDocs   []string
		want        Outcome
		wantVersion uint32
	}{
		{"child without schema adopts parent history", []string{`{"v":1}`, `{"v":2}`}, nil, OutcomeOK, 2},
		{"neither has a schema", nil, nil, OutcomeOK, 0},
		{"identical histories", []string{`{"v":1}`}, []string{`{"v":1}`}, OutcomeOK, 1},
		{"child has a schema, parent none", nil, []string{`{"v":1}`}, OutcomeRefused, 0},
		{"histories differ", []string{`{"v":1}`}, []string{`{"v":9}`}, OutcomeRefused, 0},
		{"child history is a prefix", []string{`{"v":1}`, `{"v":2}`}, []string{`{"v":1}`}, OutcomeRefused, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := newTestFSM(t)
			for _, step := range append(withSchema("orders", tc.parentDocs...), withSchema("audit", tc.childDocs...)...) {
				if step.create != "" {
					tf.must(OutcomeOK, OpCreateTopic, createCmd(step.create, 3, ""))
				} else {
					tf.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: step.topic, Doc: json.RawMessage(step.doc)})
				}
			}
			tf.must(tc.want, OpAttachChild, attach("orders", "audit", "e", 0))
			if tc.want != OutcomeOK {
				return
			}
			child := tf.topic("audit")
			if child.SchemaVersion != tc.wantVersion {
				t.Fatalf("child schema version %d, want %d", child.SchemaVersion, tc.wantVersion)
			}
			if !sameHistory(tf.store().Schemas("orders"), rename(tf.store().Schemas("audit"), "orders")) {
				t.Fatal("child history differs from the parent's after attach")
			}
		})
	}
}

type createOrSchema struct{ create, topic, doc string }

func TestDetachChildRules(t *testing.T) {
	tf := newTestFSM(t)
	for _, n := range []string{"orders", "audit", "other"} {
		tf.must(OutcomeOK, OpCreateTopic, createCmd(n, 3, ""))
	}
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e", 5000))
	tf.must(OutcomeNotFound, OpDetachChild, detachCmd{Parent: "other", Child: "audit"})
	tf.must(OutcomeNotFound, OpDetachChild, detachCmd{Parent: "nope", Child: "audit"})
	tf.must(OutcomeNotFound, OpDetachChild, detachCmd{Parent: "orders", Child: "nope"})
	tf.must(OutcomeOK, OpDetachChild, detachCmd{Parent: "orders", Child: "audit"})
	child := tf.topic("audit")
	if child.Role != RoleStandalone || child.Parent != "" || child.AttachEpoch != "" || child.AttachOffsets != nil || child.FanoutDelayMs != 0 {
		t.Fatalf("child after detach %+v", child)
	}
	if p := tf.topic("orders"); p.Role != RoleStandalone || p.Children != nil {
		t.Fatalf("parent after its last detach %+v", p)
	}
	tf.must(OutcomeNotFound, OpDetachChild, detachCmd{Parent: "orders", Child: "audit"})
	// A re-attach gets a new epoch and works again.
	tf.must(OutcomeOK, OpAttachChild, attach("orders", "audit", "e2", 0))
}
