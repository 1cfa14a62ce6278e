package meta

import (
	"encoding/json"
	"strings"
	"testing"
)

func member(id string, hb int64) memberCmd {
	return memberCmd{Member: Member{ID: id, Addr: id + ":7942", ClusterAddr: id + ":7943", LastHeartbeat: hb}}
}

// CL-9: a member's draining flag survives re-registration.
func TestDrainFlagSurvivesMemberJoin(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpMemberJoin, member("n1", 100))
	tf.must(OutcomeOK, OpSetMemberDraining, drainCmd{ID: "n1", On: true})
	tf.must(OutcomeOK, OpMemberDead, memberIDCmd{ID: "n1"})
	rejoin := member("n1", 200)
	rejoin.Member.Draining = false // a restarted node registers without the flag
	rejoin.Member.Addr = "n1-new:7942"
	tf.must(OutcomeOK, OpMemberJoin, rejoin)
	m, _ := tf.store().Member("n1")
	if !m.Draining || m.Status != MemberAlive || m.Addr != "n1-new:7942" || m.LastHeartbeat != 200 {
		t.Fatalf("after re-registration %+v: want draining kept, alive, new address", m)
	}
	tf.must(OutcomeOK, OpSetMemberDraining, drainCmd{ID: "n1", On: false})
	if m, _ := tf.store().Member("n1"); m.Draining {
		t.Fatal("draining not cleared")
	}
}

func TestMemberRules(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeInvalid, OpMemberJoin, member("", 1))
	tf.must(OutcomeNotFound, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 5})
	tf.must(OutcomeNotFound, OpMemberDead, memberIDCmd{ID: "n1"})
	tf.must(OutcomeNotFound, OpSetMemberDraining, drainCmd{ID: "n1", On: true})
	tf.must(OutcomeNotFound, OpRemoveMember, memberIDCmd{ID: "n1"})

	tf.must(OutcomeOK, OpMemberJoin, member("n1", 10))
	tf.must(OutcomeOK, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 5}) // older stamp: kept at 10
	if m, _ := tf.store().Member("n1"); m.LastHeartbeat != 10 {
		t.Fatalf("heartbeat went backwards to %d", m.LastHeartbeat)
	}
	tf.must(OutcomeOK, OpMemberDead, memberIDCmd{ID: "n1"})
	if m, _ := tf.store().Member("n1"); m.Status != MemberDead {
		t.Fatalf("status %q after MemberDead", m.Status)
	}
	tf.must(OutcomeOK, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 20})
	if m, _ := tf.store().Member("n1"); m.Status != MemberAlive || m.LastHeartbeat != 20 {
		t.Fatalf("a heartbeat did not revive a dead member: %+v", m)
	}

	// RemoveMember is refused while the member owns or receives a partition.
	tf.must(OutcomeOK, OpMemberJoin, member("n2", 10))
	tf.must(OutcomeOK, OpCreateTopic, createCmd("orders", 3, "n1"))
	tf.must(OutcomeRefused, OpRemoveMember, memberIDCmd{ID: "n1"})
	tf.must(OutcomeOK, OpSetAssignmentTarget, setTargetCmd{Topic: "orders", Partition: 0, Target: "n2", ExpectedOwner: "n1"})
	tf.must(OutcomeRefused, OpRemoveMember, memberIDCmd{ID: "n2"})
	tf.must(OutcomeOK, OpAbortMove, abortMoveCmd{Topic: "orders", Partition: 0, ExpectedTarget: "n2"})
	tf.must(OutcomeOK, OpRemoveMember, memberIDCmd{ID: "n2"})
	if _, ok := tf.store().Member("n2"); ok {
		t.Fatal("removed member still present")
	}
	if ms := tf.store().Members(); len(ms) != 1 || ms[0].ID != "n1" {
		t.Fatalf("members %+v", ms)
	}
}

func TestUserRules(t *testing.T) {
	tf := newTestFSM(t)
	u := func(name string) userCmd {
		return userCmd{User: User{Username: name, PasswordHash: "$2a$hash", CreatedAtMs: 1, UpdatedAtMs: 1,
			Grants: []Grant{{Action: ActionProduce, Patterns: []string{"orders*"}}}}}
	}
	tf.must(OutcomeInvalid, OpCreateUser, u("bad name"))
	root := u("alice")
	root.User.Root = true
	tf.must(OutcomeInvalid, OpCreateUser, root)
	tf.must(OutcomeOK, OpCreateUser, u("alice"))
	tf.must(OutcomeExists, OpCreateUser, u("alice"))
	tf.must(OutcomeNotFound, OpUpdateUser, u("bob"))
	upd := u("alice")
	upd.User.PasswordHash, upd.User.CreatedAtMs, upd.User.UpdatedAtMs, upd.User.Root = "$2a$new", 99, 99, true
	tf.must(OutcomeOK, OpUpdateUser, upd)
	if got, _ := tf.store().User("alice"); got.PasswordHash != "$2a$new" || got.CreatedAtMs != 1 || got.UpdatedAtMs != 99 || got.Root {
		t.Fatalf("after update %+v: hash replaced, created_at and root kept", got)
	}

	if tf.store().RootSeeded() {
		t.Fatal("root seeded before any seed")
	}
	tf.must(OutcomeExists, OpSeedRootUser, u("alice")) // never escalates an existing user
	if r := tf.must(OutcomeOK, OpSeedRootUser, u("admin")); !r.Seeded {
		t.Fatal("first seed did not seed")
	}
	if r := tf.must(OutcomeOK, OpSeedRootUser, u("admin2")); r.Seeded {
		t.Fatal("second seed seeded again")
	}
	if _, ok := tf.store().User("admin2"); ok || !tf.store().RootSeeded() {
		t.Fatal("second seed created a user")
	}
	if a, _ := tf.store().User("admin"); !a.Root {
		t.Fatal("seeded user is not root")
	}
	tf.must(OutcomeRefused, OpDeleteUser, userNameCmd{Username: "admin"})
	tf.must(OutcomeNotFound, OpDeleteUser, userNameCmd{Username: "bob"})
	tf.must(OutcomeOK, OpDeleteUser, userNameCmd{Username: "alice"})
	if us := tf.store().Users(); len(us) != 1 || us[0].Username != "admin" {
		t.Fatalf("users %+v", us)
	}
}

// The stopping flag (docs/internals/replication.md §9): set by a stopping heartbeat, cleared by
// the next plain heartbeat or a re-registration, and absent from the stored record while false.
func TestMemberStoppingFlag(t *testing.T) {
	tf := newTestFSM(t)
	tf.must(OutcomeOK, OpMemberJoin, member("n1", 10))
	before, _ := tf.store().Member("n1")
	if raw, _ := json.Marshal(before); strings.Contains(string(raw), "stopping") {
		t.Fatalf("a member that is not stopping stores the flag: %s", raw)
	}
	tf.must(OutcomeOK, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 11, Stopping: true})
	if m, _ := tf.store().Member("n1"); !m.Stopping || m.LastHeartbeat != 11 {
		t.Fatalf("after a stopping heartbeat %+v: want stopping, stamp 11", m)
	}
	tf.must(OutcomeOK, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 12})
	if m, _ := tf.store().Member("n1"); m.Stopping {
		t.Fatal("a plain heartbeat did not clear the stopping flag")
	}
	tf.must(OutcomeOK, OpMemberHeartbeat, heartbeatCmd{ID: "n1", At: 13, Stopping: true})
	tf.must(OutcomeOK, OpMemberJoin, member("n1", 14))
	if m, _ := tf.store().Member("n1"); m.Stopping {
		t.Fatal("re-registration did not clear the stopping flag")
	}
}
