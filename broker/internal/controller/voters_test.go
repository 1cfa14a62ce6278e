package controller

import (
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/testwait"
)

func sorted(ids []string) []string {
	out := append([]string{}, ids...)
	sort.Strings(out)
	return out
}

func TestNonvoterPromotedOnlyAfterVoterDiesThenDeadVoterDemoted(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"}, "d")
	log, trail := &logRecorder{}, &logRecorder{}
	ctl := c.start("a", log, func(cfg *Config) { cfg.Audit = audit.New(slog.New(trail), "a") })
	settle(t, ctl, 3)
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("voters with every voter alive = %v, want [a b c] (d stays a non-voter)", got)
	}

	c.kill("c")
	c.expireSilent("a", "b", "d")
	testwait.For(t, 15*time.Second, "c replaced by d", func() bool { return reflect.DeepEqual(sorted(c.voters()), []string{"a", "b", "d"}) })
	testwait.For(t, 15*time.Second, "the demotion logged", func() bool { return len(log.find("voter demoted")) > 0 })
	promoted := log.index("non-voter promoted to voter", "member", "d")
	demoted := log.index("voter demoted", "member", "c")
	if promoted < 0 || demoted < 0 || promoted > demoted {
		t.Fatalf("promotion at log %d, demotion at %d: want d promoted before c is demoted", promoted, demoted)
	}
	if r := log.find("voter demoted")[0]; r.attrs["reason"] != "dead" || r.attrs["voters"] != "3" {
		t.Fatalf("demotion log %+v, want reason=dead voters=3", r.attrs)
	}
	if role := c.leader().RaftRole("c"); role != "nonvoter" {
		t.Fatalf("dead c is %q after demotion, want nonvoter", role)
	}
	// Both changes are in the audit trail, made by the controller (docs/operating.md, Audit
	// events); a change whose proposal timed out may still have committed: unknown, not ok.
	for _, want := range []map[string]string{
		{"event": "cluster.voter.promote", "target": "d"},
		{"event": "cluster.voter.demote", "target": "c", "reason": "dead"},
	} {
		i := trail.index(audit.Message, "event", want["event"])
		if i < 0 {
			t.Fatalf("no %s audit record", want["event"])
		}
		got := trail.records[i].attrs
		if got["actor"] != audit.ActorController || (got["outcome"] != audit.OK && got["outcome"] != audit.Unknown) || got["node"] != "a" {
			t.Fatalf("%s audit record %v", want["event"], got)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s audit record %v: %s = %q, want %q", want["event"], got, k, got[k], v)
			}
		}
	}
}

func TestLaggingNonvoterIsNotPromoted(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"}, "d")
	c.prober.setLag("d", true)
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 1)
	c.expireSilent("a", "b", "d") // c stops heartbeating (its node keeps running)
	testwait.For(t, 15*time.Second, "c marked dead", func() bool { return status(t, c.leader(), "c") == "dead" })
	calls := c.prober.callCount()
	settle(t, ctl, 3)
	if c.prober.callCount() == calls {
		t.Fatal("the lagging non-voter was never probed")
	}
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("voters = %v with only a lagging replacement, want [a b c] (no promotion, dead c kept)", got)
	}
	c.prober.setLag("d", false)
	testwait.For(t, 15*time.Second, "d promoted once caught up", func() bool { return reflect.DeepEqual(sorted(c.voters()), []string{"a", "b", "d"}) })
}

func TestFirstThreeNodesBecomeVotersLaterOnesStayNonvoters(t *testing.T) {
	c := openCluster(t, []string{"a"}, "b", "c", "d")
	ctl := c.start("a", nil, nil)
	testwait.For(t, 15*time.Second, "three voters", func() bool { return len(c.voters()) == 3 })
	settle(t, ctl, 2)
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("voters = %v, want [a b c]", got)
	}
}

// Two servers alone never make two voters: the count stays odd until a third is eligible.
func TestVoterCountStaysOddBelowThreeEligible(t *testing.T) {
	c := openCluster(t, []string{"a"}, "b", "c")
	c.prober.setLag("c", true)
	ctl := c.start("a", nil, nil)
	settle(t, ctl, 3)
	if got := c.voters(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("voters = %v with one eligible non-voter, want [a]", got)
	}
	c.prober.setLag("c", false)
	testwait.For(t, 15*time.Second, "three voters", func() bool { return len(c.voters()) == 3 })
}

func TestEvenAliveVoterCountDemotesHighestNonLeader(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c", "d"})
	log := &logRecorder{}
	c.start("a", log, nil)
	testwait.For(t, 15*time.Second, "an odd voter count", func() bool { return len(c.voters()) == 3 })
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("voters = %v, want d (highest non-leader) demoted", got)
	}
	testwait.For(t, 15*time.Second, "the demotion logged", func() bool { return len(log.find("voter demoted")) > 0 })
	if r := log.find("voter demoted"); len(r) != 1 || r[0].attrs["reason"] != "excess" {
		t.Fatalf("demotion logs = %+v, want one with reason=excess", r)
	}
}

func TestVoterWithoutMemberRecordIsLeftAlone(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c", "d"})
	if err := c.leader().RemoveMember(ctxT(t), "d"); err != nil {
		t.Fatal(err)
	}
	log := &logRecorder{}
	ctl := c.start("a", log, nil)
	testwait.For(t, 15*time.Second, "an odd voter count", func() bool { return len(c.voters()) == 3 })
	settle(t, ctl, 2)
	if got := sorted(c.voters()); !reflect.DeepEqual(got, []string{"a", "b", "d"}) {
		t.Fatalf("voters = %v, want c demoted and record-less d left alone", got)
	}
	// Once per leadership: a loaded machine may cost node a its leadership and give it back.
	r, leads := log.find("voter has no member record; left alone"), len(log.find("controller leading"))
	if len(r) == 0 || len(r) > leads || slices.ContainsFunc(r, func(e record) bool { return e.attrs["member"] != "d" }) {
		t.Fatalf("record-less voter logs = %+v over %d leaderships, want one for d per leadership", r, leads)
	}
}
