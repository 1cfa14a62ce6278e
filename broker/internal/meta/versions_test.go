package meta

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

type versionSet struct {
	topic, assignments, schemas, users, members, latest uint64
}

func versionsOf(s *Store, topic string) versionSet {
	return versionSet{s.TopicVersion(topic), s.AssignmentsVersion(topic), s.SchemasVersion(topic),
		s.UsersVersion(), s.MembersVersion(), s.LatestDomainVersion()}
}

// CL-4: heartbeats and drain flags never move LatestDomainVersion; a member going dead does.
func TestLatestDomainVersionIgnoresHeartbeatsAndDrainFlags(t *testing.T) {
	tf := newTestFSM(t)
	s := tf.store()
	tf.must(OutcomeOK, OpMemberJoin, member("n1", 1))
	latest, meta := s.LatestDomainVersion(), s.MetadataVersion()
	for i := int64(2); i < 102; i++ {
		tf.must(OutcomeOK, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: i})
	}
	tf.must(OutcomeOK, OpMemberJoin, member("n1", 200)) // re-registration, same addresses
	tf.must(OutcomeOK, OpSetMemberDraining, drainCmd{ID: "n1", On: true})
	tf.must(OutcomeOK, OpSetMemberDraining, drainCmd{ID: "n1", On: false})
	if got := s.LatestDomainVersion(); got != latest {
		t.Fatalf("LatestDomainVersion moved %d → %d on heartbeats/drain flags", latest, got)
	}
	if s.MetadataVersion() <= meta {
		t.Fatal("MetadataVersion did not move on applied entries")
	}
	if m, _ := s.Member("n1"); m.LastHeartbeat != 200 {
		t.Fatalf("heartbeats were not applied: %+v", m)
	}
	tf.must(OutcomeOK, OpMemberDead, memberIDCmd{ID: "n1"})
	if s.LatestDomainVersion() <= latest {
		t.Fatal("a member going dead did not move LatestDomainVersion")
	}
}

func TestOpsBumpTheirDomains(t *testing.T) {
	const (
		topicD = 1 << iota
		assignD
		schemaD
		usersD
		membersD
	)
	setup := func(t *testing.T) *testFSM {
		tf := newTestFSM(t)
		tf.must(OutcomeOK, OpMemberJoin, member("n1", 1))
		tf.must(OutcomeOK, OpMemberJoin, member("n2", 1))
		tf.must(OutcomeOK, OpMemberDead, memberIDCmd{ID: "n2"})
		tf.must(OutcomeOK, OpCreateTopic, createCmd("parent", 3, "n1"))
		tf.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: "parent", Doc: json.RawMessage(`{}`)})
		tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
		tf.must(OutcomeOK, OpCreateTopic, createCmd("linked", 3, ""))
		tf.must(OutcomeOK, OpAttachChild, attach("parent", "linked", "e", 0))
		tf.must(OutcomeOK, OpCreateUser, userCmd{User: User{Username: "alice"}})
		return tf
	}
	cases := []struct {
		name    string
		op      uint8
		payload any
		topic   string // whose per-topic versions are checked
		bumps   int
	}{
		{"create topic", OpCreateTopic, createCmd("fresh", 3, "n1"), "fresh", topicD | assignD},
		{"update topic", OpUpdateTopic, updateTopicCmd{Topic: newTopic("orders", 4)}, "orders", topicD},
		{"delete topic", OpDeleteTopic, deleteTopicCmd{Name: "orders"}, "orders", topicD | assignD | schemaD},
		{"put schema", OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(`{"a":1}`)}, "orders", topicD | schemaD},
		{"put schema reaches children", OpPutSchema, putSchemaCmd{Topic: "parent", Doc: json.RawMessage(`{"a":1}`)}, "linked", topicD | schemaD},
		{"assign partition", OpAssignPartition, assignCmd{Assignment: Assignment{Topic: "linked", Partition: 0, Owner: "n1"}}, "linked", assignD},
		{"member join (new)", OpMemberJoin, member("n3", 1), "orders", membersD},
		{"member join (same)", OpMemberJoin, member("n1", 50), "orders", 0},
		{"member join (address change)", OpMemberJoin, memberCmd{Member: Member{ID: "n1", Addr: "x:1"}}, "orders", membersD},
		{"member heartbeat", OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 99}, "orders", 0},
		{"member heartbeat revives", OpMemberHeartbeat, heartbeatCmd{ID: "n2", At: 99}, "orders", membersD},
		{"member dead", OpMemberDead, memberIDCmd{ID: "n1"}, "orders", membersD},
		{"drain flag", OpSetMemberDraining, drainCmd{ID: "n1", On: true}, "orders", 0},
		{"remove member", OpRemoveMember, memberIDCmd{ID: "n2"}, "orders", membersD},
		{"create user", OpCreateUser, userCmd{User: User{Username: "bob"}}, "orders", usersD},
		{"update user", OpUpdateUser, userCmd{User: User{Username: "alice", PasswordHash: "x"}}, "orders", usersD},
		{"delete user", OpDeleteUser, userNameCmd{Username: "alice"}, "orders", usersD},
		{"seed root", OpSeedRootUser, userCmd{User: User{Username: "admin"}}, "orders", usersD},
		{"attach adopts schemas", OpAttachChild, attach("parent", "orders", "e2", 0), "orders", topicD | schemaD},
		{"detach", OpDetachChild, detachCmd{Parent: "parent", Child: "linked"}, "linked", topicD},
		{"set target", OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "n2", ExpectedOwner: "n1"}, "orders", assignD},
		{"refused command", OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "n2", ExpectedOwner: "n9"}, "orders", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf := setup(t)
			s := tf.store()
			before := versionsOf(s, tc.topic)
			tf.apply(tc.op, tc.payload)
			after := versionsOf(s, tc.topic)
			check := func(domain string, bit int, b, a uint64) {
				if moved := a != b; moved != (tc.bumps&bit != 0) {
					t.Errorf("%s version %d → %d; want moved=%v", domain, b, a, tc.bumps&bit != 0)
				}
				if a < b {
					t.Errorf("%s version went backwards", domain)
				}
			}
			check("topic", topicD, before.topic, after.topic)
			check("assignments", assignD, before.assignments, after.assignments)
			check("schemas", schemaD, before.schemas, after.schemas)
			check("users", usersD, before.users, after.users)
			check("members", membersD, before.members, after.members)
			if (after.latest != before.latest) != (tc.bumps != 0) {
				t.Errorf("LatestDomainVersion %d → %d with bumps %b", before.latest, after.latest, tc.bumps)
			}
		})
	}
}

// Every bump draws from one counter: a newer version of any domain exceeds every older one.
func TestDomainVersionsShareOneCounter(t *testing.T) {
	tf := newTestFSM(t)
	s := tf.store()
	tf.must(OutcomeOK, OpCreateTopic, createCmd("a", 3, ""))
	va := s.TopicVersion("a")
	tf.must(OutcomeOK, OpCreateUser, userCmd{User: User{Username: "u"}})
	vu := s.UsersVersion()
	tf.must(OutcomeOK, OpCreateTopic, createCmd("b", 3, ""))
	vb := s.TopicVersion("b")
	if !(va < vu && vu < vb && vb == s.LatestDomainVersion()) {
		t.Fatalf("versions a=%d users=%d b=%d latest=%d are not one increasing sequence", va, vu, vb, s.LatestDomainVersion())
	}
}

// CL-3: restoring a snapshot bumps every domain version (per-key ones included) and reports
// OpRestore, so the next reconcile tick runs a full pass.
func TestRestoreBumpsEveryDomainVersion(t *testing.T) {
	src := newTestFSM(t)
	src.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	src.must(OutcomeOK, OpMemberJoin, member("n1", 1))
	var buf bytes.Buffer
	if err := writeSnapshotStream(&buf, src.f.db); err != nil {
		t.Fatal(err)
	}

	dst := newTestFSM(t)
	dst.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	dst.must(OutcomeOK, OpPutSchema, putSchemaCmd{Topic: "orders", Doc: json.RawMessage(`{}`)})
	dst.must(OutcomeOK, OpCreateUser, userCmd{User: User{Username: "u"}})
	s := dst.store()
	before := versionsOf(s, "orders")
	meta := s.MetadataVersion()
	dst.events = nil
	var sawOrders bool
	dst.f.onApply = func(e Event) { // a listener may read the store from the event
		dst.events = append(dst.events, e)
		_, sawOrders = dst.f.topic("orders")
	}
	if err := dst.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if !sawOrders {
		t.Fatal("restored state not visible to the OpRestore listener")
	}
	after := versionsOf(s, "orders")
	if after.topic <= before.topic || after.assignments <= before.assignments || after.schemas <= before.schemas ||
		after.users <= before.users || after.members <= before.members || after.latest <= before.latest {
		t.Fatalf("restore did not bump every domain: %+v → %+v", before, after)
	}
	if s.MetadataVersion() <= meta {
		t.Fatal("restore did not bump MetadataVersion")
	}
	if len(dst.events) != 1 || dst.events[0].Op != OpRestore {
		t.Fatalf("events after restore %+v, want one OpRestore", dst.events)
	}
}

// Opening the FSM starts every domain at a fresh version, so a first tick always runs.
func TestOpenStartsEveryDomainVersionFresh(t *testing.T) {
	tf := newTestFSM(t)
	v := versionsOf(tf.store(), "any")
	if v.topic == 0 || v.assignments == 0 || v.schemas == 0 || v.users == 0 || v.members == 0 || v.latest == 0 {
		t.Fatalf("versions after open %+v: every domain must start bumped", v)
	}
}
