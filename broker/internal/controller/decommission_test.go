package controller

import (
	"errors"
	"reflect"
	"testing"

	"narad.dev/broker/internal/meta"
)

func draining(t *testing.T, st *meta.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := st.SetMemberDraining(ctxT(t), id, true); err != nil {
			t.Fatal(err)
		}
	}
}

func dead(t *testing.T, st *meta.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := st.MemberDead(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
	}
}

func isDraining(t *testing.T, st *meta.Store, id string) bool {
	t.Helper()
	m, ok := st.Member(id)
	if !ok {
		t.Fatalf("member %s missing", id)
	}
	return m.Draining
}

// The up-front evaluation: each reason exactly when its condition holds.
func TestEvaluateDecommissionReasons(t *testing.T) {
	cases := []struct {
		name      string
		voters    []string
		nonvoters []string
		dead      []string
		draining  []string
		owners    []string // one partition of "orders" per entry
		node      string
		want      []string
	}{
		{name: "three voters: min_voters (MV-43)", voters: []string{"a", "b", "c"}, node: "b", want: []string{ReasonMinVoters}},
		{name: "four voters: allowed", voters: []string{"a", "b", "c", "d"}, node: "d", want: []string{}},
		{name: "non-voter with three voters: no voter guards (MV-48)", voters: []string{"a", "b", "c"}, nonvoters: []string{"d"}, node: "d", want: []string{}},
		{name: "five voters, two dead: a live one refused (MV-43)", voters: []string{"a", "b", "c", "d", "e"}, dead: []string{"d", "e"}, node: "c", want: []string{ReasonNoLiveMajority}},
		{name: "five voters, two dead: a dead one allowed", voters: []string{"a", "b", "c", "d", "e"}, dead: []string{"d", "e"}, node: "d", want: []string{}},
		{name: "nobody else can take its partitions", voters: []string{"a", "b", "c", "d"}, draining: []string{"a", "b", "c"}, owners: []string{"d", "d", "a"}, node: "d", want: []string{ReasonNoReceivers}},
		{name: "dead and owning partitions", voters: []string{"a", "b", "c", "d"}, dead: []string{"d"}, owners: []string{"d", "a", "b"}, node: "d", want: []string{ReasonDeadOwner}},
		{name: "dead, owning nothing: allowed", voters: []string{"a", "b", "c", "d"}, dead: []string{"d"}, owners: []string{"a", "b", "c"}, node: "d", want: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openCluster(t, []string{"a"})
			all := append(append([]string{}, tc.voters...), tc.nonvoters...)
			c.join(all[1:]...)
			st := c.leader()
			if len(tc.owners) > 0 {
				var as []meta.Assignment
				for p, o := range tc.owners {
					as = append(as, meta.Assignment{Topic: "orders", Partition: p, Owner: o})
				}
				createOwned(t, st, "orders", as)
			}
			dead(t, st, tc.dead...)
			draining(t, st, tc.draining...)
			ctl := c.manual(newMembership(tc.voters, tc.nonvoters...), &logRecorder{}, nil)
			got := ctl.EvaluateDecommission(tc.node)
			if !reflect.DeepEqual(got.Reasons, tc.want) || got.Allowed != (len(tc.want) == 0) || got.Node != tc.node {
				t.Fatalf("verdict = %+v, want reasons %v", got, tc.want)
			}
		})
	}
}

// The API: unknown member, dry run, refusal, start (idempotent), cancel, cancel after removal.
func TestDecommissionCallsDryRunRefuseStartAndCancel(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st, ctx := c.leader(), ctxT(t)
	ms := newMembership([]string{"a", "b", "c"}, "d")
	ctl := c.manual(ms, &logRecorder{}, nil)

	if _, err := ctl.Decommission(ctx, "zz", false); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("unknown member: %v, want ErrNotFound", err)
	}
	if err := ctl.CancelDecommission(ctx, "zz"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("cancel of an unknown member: %v, want ErrNotFound", err)
	}
	// With the caught-up non-voter d, a voter of three can go: C3 promotes d first.
	if v, err := ctl.Decommission(ctx, "b", true); err != nil || !v.Allowed {
		t.Fatalf("dry run for a voter with a promotable non-voter = %+v, %v; want allowed", v, err)
	}
	// Without a non-voter it would leave two voters: refused up front.
	three := c.manual(newMembership([]string{"a", "b", "c"}), &logRecorder{}, nil)
	v, err := three.Decommission(ctx, "b", true)
	if err != nil || v.Allowed || !reflect.DeepEqual(v.Reasons, []string{ReasonMinVoters}) {
		t.Fatalf("dry run of a refused decommission = %+v, %v; want the min_voters verdict and no error", v, err)
	}
	v, err = three.Decommission(ctx, "b", false)
	if !errors.Is(err, ErrRefused) || !reflect.DeepEqual(v.Reasons, []string{ReasonMinVoters}) {
		t.Fatalf("decommission of a voter of three = %+v, %v; want ErrRefused with min_voters", v, err)
	}
	if isDraining(t, st, "b") {
		t.Fatal("a refused decommission marked the node draining")
	}
	if v, err = ctl.Decommission(ctx, "d", true); err != nil || !v.Allowed {
		t.Fatalf("dry run for the non-voter = %+v, %v; want allowed", v, err)
	}
	if isDraining(t, st, "d") {
		t.Fatal("a dry run marked the node draining")
	}
	for range 2 { // idempotent
		if v, err = ctl.Decommission(ctx, "d", false); err != nil || !v.Allowed || !isDraining(t, st, "d") {
			t.Fatalf("decommission of the non-voter = %+v, %v, draining %v", v, err, isDraining(t, st, "d"))
		}
	}
	if err := ctl.CancelDecommission(ctx, "d"); err != nil || isDraining(t, st, "d") {
		t.Fatalf("cancel = %v, draining %v; want the flag cleared", err, isDraining(t, st, "d"))
	}
	if err := ctl.CancelDecommission(ctx, "d"); err != nil {
		t.Fatalf("second cancel = %v, want nil (idempotent)", err)
	}
	if _, err := ctl.Decommission(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	log := &logRecorder{}
	ctl = c.manual(ms, log, nil)
	pass(t, ctl, log)
	if removed, _ := ms.calls(); !reflect.DeepEqual(removed, []string{"d"}) {
		t.Fatalf("removed = %v, want [d]", removed)
	}
	if err := ctl.CancelDecommission(ctx, "d"); !errors.Is(err, ErrRemoved) {
		t.Fatalf("cancel after removal = %v, want ErrRemoved", err)
	}
	if !isDraining(t, st, "d") {
		t.Fatal("the removed node's drain flag was cleared")
	}
}

// MV-43: dead draining voters are removed before live ones, so a live draining voter that
// needs their removal to keep a live majority is removed in the same pass; alone it is held.
func TestDeadDrainingVotersRemovedBeforeLiveOnes(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d", "e")
	st := c.leader()
	dead(t, st, "d", "e")
	draining(t, st, "c")
	ms := newMembership([]string{"a", "b", "c", "d", "e"})
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	pass(t, ctl, log)
	if removed, _ := ms.calls(); len(removed) != 0 {
		t.Fatalf("removed %v with two of five voters dead, want none", removed)
	}
	if got := ctl.DecommissionBlocked()["c"]; !reflect.DeepEqual(got, []string{ReasonNoLiveMajority}) {
		t.Fatalf("c blocked by %v, want [no_live_majority]", got)
	}

	draining(t, st, "d")
	pass(t, ctl, log)
	if removed, _ := ms.calls(); !reflect.DeepEqual(removed, []string{"d", "c"}) {
		t.Fatalf("removal order = %v, want the dead d before the live c", removed)
	}
	if got := ctl.DecommissionBlocked(); !reflect.DeepEqual(got, map[string][]string{"c": {}, "d": {}}) {
		t.Fatalf("blocked = %v, want nothing blocked for c and d", got)
	}
	if m, ok := st.Member("c"); !ok || !m.Draining {
		t.Fatal("a removed member's record must stay, draining")
	}
}

// MV-44: a draining leader hands leadership to an alive voter (not a draining one) instead
// of removing itself, reason leader_transfer.
func TestDrainingLeaderTransfersLeadershipInsteadOfRemovingItself(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d", "e")
	st := c.leader()
	dead(t, st, "c")
	draining(t, st, "a", "b")
	ms := newMembership([]string{"a", "b", "c", "d", "e"})
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	pass(t, ctl, log)
	removed, transfers := ms.calls()
	if !reflect.DeepEqual(transfers, []string{"d@d"}) {
		t.Fatalf("transfers = %v, want one to d (alive, not draining, lowest ID)", transfers)
	}
	if len(removed) != 0 {
		t.Fatalf("removed %v; the leader must not remove itself and the pass stops after the transfer", removed)
	}
	if got := ctl.DecommissionBlocked()["a"]; !reflect.DeepEqual(got, []string{ReasonLeaderTransfer}) {
		t.Fatalf("a blocked by %v, want [leader_transfer]", got)
	}
}

// MV-45: a draining node with ingress backlog is not removed until it reports zero itself.
func TestIngressBacklogBlocksRemovalUntilTheNodeReportsZero(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st := c.leader()
	draining(t, st, "d")
	ms := newMembership([]string{"a", "b", "c", "d"})
	prober := &statusProber{}
	log := &logRecorder{}
	ctl := c.manual(ms, log, func(cfg *Config) { cfg.Prober = prober })
	zero := Status{DrainingSeen: true, RefusingProduce: true}
	for _, tc := range []struct {
		name string
		st   Status
	}{
		{"drain not seen yet", Status{RefusingProduce: true}},
		{"still accepting produce", Status{DrainingSeen: true}},
		{"admitted produce unanswered", Status{DrainingSeen: true, RefusingProduce: true, AdmittedInflight: 1}},
		{"WAL records undispatched", Status{DrainingSeen: true, RefusingProduce: true, IngressUndispatched: 3}},
	} {
		prober.set("d", tc.st)
		pass(t, ctl, log)
		if removed, _ := ms.calls(); len(removed) != 0 {
			t.Fatalf("%s: removed %v", tc.name, removed)
		}
		if got := ctl.DecommissionBlocked()["d"]; !reflect.DeepEqual(got, []string{ReasonIngressBacklog}) {
			t.Fatalf("%s: d blocked by %v, want [ingress_backlog]", tc.name, got)
		}
	}
	if n := len(log.find("decommission blocked")); n != 1 {
		t.Fatalf("ingress_backlog logged %d times while it held, want once", n)
	}
	prober.set("d", zero)
	pass(t, ctl, log)
	if removed, _ := ms.calls(); !reflect.DeepEqual(removed, []string{"d"}) {
		t.Fatalf("removed = %v after a zero backlog, want [d]", removed)
	}
}

// MV-46: a move onto a draining node whose source is dead is left alone (move_target, error
// log) and the node is not removed; other moves onto it are cleared.
func TestMoveOntoDrainingNodeFromDeadSourceIsKept(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "d", "x")
	st := c.leader()
	createOwned(t, st, "orders", []meta.Assignment{{Topic: "orders", Partition: 0, Owner: "x"},
		{Topic: "orders", Partition: 1, Owner: "a"}, {Topic: "orders", Partition: 2, Owner: "b"}})
	aim(t, st, "orders", 0, "x", "d")
	aim(t, st, "orders", 1, "a", "d")
	dead(t, st, "x")
	draining(t, st, "d")
	ms := newMembership([]string{"a", "b", "x"}, "d")
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	pass(t, ctl, log)
	pass(t, ctl, log)
	if got := targetsOf(st, "orders"); got[0] != "d" || got[1] != "" {
		t.Fatalf("targets = %v: want the dead source's move to d kept and a's move to d cleared", got)
	}
	if removed, _ := ms.calls(); len(removed) != 0 {
		t.Fatalf("removed %v while d is a move's target", removed)
	}
	if got := ctl.DecommissionBlocked()["d"]; !reflect.DeepEqual(got, []string{ReasonMoveTarget}) {
		t.Fatalf("d blocked by %v, want [move_target]", got)
	}
	if n := len(log.find("move onto a draining node left alone: its source is dead or not a member")); n != 1 {
		t.Fatalf("kept move logged %d times, want once", n)
	}
	if recs := log.find("decommission blocked"); len(recs) != 1 || recs[0].attrs["reason"] != ReasonMoveTarget {
		t.Fatalf("decommission blocked logs = %+v, want one move_target", recs)
	}
}

// MV-48: a never-promoted non-voter is removed with three voters, without voter guards.
func TestNonvoterRemovedWithoutVoterGuards(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	ctx := ctxT(t)
	ms := newMembership([]string{"a", "b", "c"}, "d")
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	if _, err := ctl.Decommission(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	pass(t, ctl, log)
	if removed, _ := ms.calls(); !reflect.DeepEqual(removed, []string{"d"}) {
		t.Fatalf("removed = %v, want the non-voter d", removed)
	}
}

// A draining node is removed only once it owns nothing: the planner sheds its partitions
// first.
func TestDrainingNodeRemovedOnlyAfterItsPartitionsMoved(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st, ctx := c.leader(), ctxT(t)
	createOwned(t, st, "orders", ownedBy("orders", "d", 0, 3), ownedBy("orders", "a", 3, 1))
	ms := newMembership([]string{"a", "b", "c"}, "d")
	log := &logRecorder{}
	ctl := c.manual(ms, log, nil)
	if _, err := ctl.Decommission(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	pass(t, ctl, log)
	if removed, _ := ms.calls(); len(removed) != 0 {
		t.Fatalf("removed %v while d owns partitions", removed)
	}
	if _, targeted := loads(st); targeted["d"] != 0 || sum(targeted) != 3 {
		t.Fatalf("targets = %v, want d's three partitions aimed elsewhere", targeted)
	}
	flipAll(t, st)
	pass(t, ctl, log)
	if removed, _ := ms.calls(); !reflect.DeepEqual(removed, []string{"d"}) {
		t.Fatalf("removed = %v once d owns nothing, want [d]", removed)
	}
}

// A dry run carries the moves the planner would make to drain the node, and changes nothing:
// no target is set and the node is not marked draining.
func TestDecommissionDryRunCarriesTheDrainPlan(t *testing.T) {
	c := openCluster(t, []string{"a"})
	c.join("b", "c", "d")
	st, ctx := c.leader(), ctxT(t)
	createOwned(t, st, "orders", []meta.Assignment{
		{Topic: "orders", Partition: 0, Owner: "a"}, {Topic: "orders", Partition: 1, Owner: "b"},
		{Topic: "orders", Partition: 2, Owner: "c"}, {Topic: "orders", Partition: 3, Owner: "d"},
		{Topic: "orders", Partition: 4, Owner: "d"},
	})
	ctl := c.manual(newMembership([]string{"a", "b", "c", "d"}), &logRecorder{}, nil)
	v, err := ctl.Decommission(ctx, "d", true)
	if err != nil || !v.Allowed {
		t.Fatalf("dry run = %+v, %v; want allowed", v, err)
	}
	if len(v.Moves) != 2 {
		t.Fatalf("planned moves = %+v, want d's two partitions", v.Moves)
	}
	to := map[string]int{}
	for _, mv := range v.Moves {
		if mv.From != "d" || mv.Topic != "orders" || (mv.Partition != 3 && mv.Partition != 4) || mv.To == "d" {
			t.Fatalf("planned move %+v does not drain d", mv)
		}
		to[mv.To]++
	}
	if len(to) != 2 {
		t.Fatalf("both partitions planned onto one node: %+v (floor/ceil balance spreads them)", v.Moves)
	}
	if isDraining(t, st, "d") {
		t.Fatal("a dry run marked the node draining")
	}
	for _, a := range st.AllAssignments() {
		if a.Target != "" {
			t.Fatalf("a dry run set a target: %+v", a)
		}
	}
}
