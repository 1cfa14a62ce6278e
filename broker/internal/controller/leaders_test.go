package controller

import (
	"reflect"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
)

var planNow = time.Unix(1_700_000_000, 0)

// viewOf builds a leaderView on node "a" at planNow, leading since an hour ago, with the
// default failover timer. Members are alive and heartbeating now unless listed in silent
// (last heartbeat 11 s ago), dead (status dead) or draining.
func viewOf(topics []meta.Topic, as []meta.Assignment, silent, dead, draining []string) *leaderView {
	var ms []meta.Member
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		m := meta.Member{ID: id, Status: meta.MemberAlive, LastHeartbeat: planNow.Unix()}
		for _, s := range silent {
			if s == id {
				m.LastHeartbeat = planNow.Add(-DefaultReplicaFailoverAfter - time.Second).Unix()
			}
		}
		for _, s := range dead {
			if s == id {
				m.Status = meta.MemberDead
			}
		}
		for _, s := range draining {
			if s == id {
				m.Draining = true
			}
		}
		ms = append(ms, m)
	}
	return newLeaderView("a", planNow, planNow.Add(-time.Hour), DefaultReplicaFailoverAfter, topics, ms, as)
}

func rtopic(name string, rf int, unclean bool) meta.Topic {
	return meta.Topic{Name: name, Partitions: 1, ReplicationFactor: rf, UncleanLeaderElection: unclean}
}

func part(name string, owner string, replicas, isr []string) meta.Assignment {
	return meta.Assignment{Topic: name, Partition: 0, Owner: owner, Replicas: replicas, ISR: isr}
}

func TestPlanFailoverRules(t *testing.T) {
	bcd := []string{"b", "c", "d"}
	cases := []struct {
		name                  string
		topic                 meta.Topic
		a                     meta.Assignment
		silent, dead, missing []string
		want                  []election // To and Reason only
		waits                 bool
	}{
		{name: "leader alive: nothing", topic: rtopic("t", 3, false), a: part("t", "b", bcd, bcd)},
		{name: "silent leader: first live ISR member", topic: rtopic("t", 3, false), a: part("t", "b", bcd, bcd),
			silent: []string{"b"}, want: []election{{To: "c", Reason: meta.ElectDead}}},
		{name: "dead leader record: elected at once", topic: rtopic("t", 3, false), a: part("t", "b", bcd, bcd),
			dead: []string{"b"}, want: []election{{To: "c", Reason: meta.ElectDead}}},
		{name: "silent candidate skipped", topic: rtopic("t", 3, false), a: part("t", "b", bcd, bcd),
			silent: []string{"b", "c"}, want: []election{{To: "d", Reason: meta.ElectDead}}},
		{name: "dead-status candidate skipped", topic: rtopic("t", 3, false), a: part("t", "b", bcd, bcd),
			silent: []string{"b"}, dead: []string{"c"}, want: []election{{To: "d", Reason: meta.ElectDead}}},
		{name: "out-of-sync candidate skipped", topic: rtopic("t", 3, false), a: part("t", "b", bcd, []string{"b", "d"}),
			silent: []string{"b"}, want: []election{{To: "d", Reason: meta.ElectDead}}},
		{name: "this node is never failed", topic: rtopic("t", 2, false), a: part("t", "a", []string{"a", "b"}, []string{"a", "b"})},
		{name: "this node is a live candidate", topic: rtopic("t", 2, false), a: part("t", "b", []string{"b", "a"}, []string{"b", "a"}),
			dead: []string{"b"}, want: []election{{To: "a", Reason: meta.ElectDead}}},
		{name: "no live ISR member: waits", topic: rtopic("t", 3, false), a: part("t", "b", bcd, []string{"b"}),
			silent: []string{"b"}, waits: true},
		{name: "unclean: first live replica", topic: rtopic("t", 3, true), a: part("t", "b", bcd, []string{"b", "c"}),
			silent: []string{"b", "c"}, want: []election{{To: "d", Reason: meta.ElectUnclean}}},
		{name: "unclean prefers a live ISR member", topic: rtopic("t", 3, true), a: part("t", "b", bcd, []string{"b", "d"}),
			silent: []string{"b"}, want: []election{{To: "d", Reason: meta.ElectDead}}},
		{name: "unclean with no live replica: waits", topic: rtopic("t", 3, true), a: part("t", "b", bcd, bcd),
			silent: []string{"b", "c", "d"}, waits: true},
		{name: "leader record removed", topic: rtopic("t", 2, false), a: part("t", "x", []string{"x", "b"}, []string{"x", "b"}),
			want: []election{{To: "b", Reason: meta.ElectDead}}},
		{name: "R = 1: never", topic: rtopic("t", 1, false), a: meta.Assignment{Topic: "t", Owner: "b"}, dead: []string{"b"}},
		{name: "R unset: never", topic: rtopic("t", 0, false), a: meta.Assignment{Topic: "t", Owner: "b"}, silent: []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := viewOf([]meta.Topic{tc.topic}, []meta.Assignment{tc.a}, tc.silent, tc.dead, nil).planFailover()
			var got []election
			for _, e := range p.elections {
				if e.From != tc.a.Owner || e.Epoch != tc.a.LeaderEpoch {
					t.Fatalf("election %+v does not name the current leader and epoch", e)
				}
				got = append(got, election{To: e.To, Reason: e.Reason})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("elections %+v, want %+v", got, tc.want)
			}
			if (len(p.waiting) == 1) != tc.waits {
				t.Fatalf("waiting %+v, want waits=%v", p.waiting, tc.waits)
			}
		})
	}
}

// A controller that just gained leadership measures a leader's silence from its own start, so
// stamps it inherited do not depose anyone; a dead record still does.
func TestPlanFailoverGivesANewControllerGrace(t *testing.T) {
	bcd := []string{"b", "c", "d"}
	v := viewOf([]meta.Topic{rtopic("t", 3, false)}, []meta.Assignment{part("t", "b", bcd, bcd)}, []string{"b"}, nil, nil)
	v.since = planNow.Add(-time.Second)
	if p := v.planFailover(); len(p.elections) != 0 {
		t.Fatalf("elections %+v on inherited stamps, want none", p.elections)
	}
	v.since = planNow.Add(-DefaultReplicaFailoverAfter - time.Second)
	if p := v.planFailover(); len(p.elections) != 1 {
		t.Fatalf("elections %+v once the grace ran out, want one", p.elections)
	}
}

func TestImbalanceThresholdIsStrictlyAboveTenPercent(t *testing.T) {
	for _, c := range []struct {
		preferred, misled int
		want              bool
	}{{0, 0, false}, {10, 0, false}, {10, 1, false}, {9, 1, true}, {8, 1, true}, {20, 2, false}, {20, 3, true}, {1, 1, true}} {
		if got := imbalanced(c.preferred, c.misled); got != c.want {
			t.Errorf("imbalanced(%d preferred, %d misled) = %v, want %v", c.preferred, c.misled, got, c.want)
		}
	}
}

func TestPlanPreferredRules(t *testing.T) {
	bc, cb := []string{"b", "c"}, []string{"c", "b"}
	cases := []struct {
		name                   string
		a                      meta.Assignment
		silent, dead, draining []string
		want                   bool
	}{
		{name: "misled, preferred live and in sync", a: part("t", "c", bc, bc), want: true},
		{name: "led by its preferred leader", a: part("t", "b", bc, bc)},
		{name: "preferred out of the ISR", a: part("t", "c", bc, []string{"c"})},
		{name: "preferred silent", a: part("t", "c", bc, bc), silent: []string{"b"}},
		{name: "preferred dead", a: part("t", "c", bc, bc), dead: []string{"b"}},
		{name: "preferred draining", a: part("t", "c", bc, bc), draining: []string{"b"}},
		{name: "other order", a: part("t", "b", cb, cb), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := viewOf([]meta.Topic{rtopic("t", 2, false)}, []meta.Assignment{tc.a}, tc.silent, tc.dead, tc.draining)
			got := v.planPreferred(MaxPreferredElections)
			if (len(got) == 1) != tc.want {
				t.Fatalf("elections %+v, want one: %v", got, tc.want)
			}
			if tc.want && (got[0].To != tc.a.ReplicaSet()[0] || got[0].Reason != meta.ElectPreferred) {
				t.Fatalf("election %+v, want to the preferred leader with reason preferred", got[0])
			}
		})
	}
	// R = 1 partitions count neither toward the imbalance nor for elections.
	v := viewOf([]meta.Topic{rtopic("t", 1, false)}, []meta.Assignment{{Topic: "t", Owner: "c"}}, nil, nil, nil)
	if got := v.planPreferred(MaxPreferredElections); len(got) != 0 {
		t.Fatalf("R = 1 elections %+v", got)
	}
}
