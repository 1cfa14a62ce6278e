package controller

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"narad.dev/broker/internal/meta"
)

// An operator's preferred election moves every partition back to a live in-sync preferred
// leader, even below the rebalance's 10 % threshold, and answers what it did; the topic and
// partition filters narrow it, and bad filters are refused.
func TestElectLeadersPreferredIgnoresTheImbalanceThreshold(t *testing.T) {
	owners := []string{"c"} // b prefers 21, c leads two: under 10 %, left alone by C11
	reps := make([][]string, 20)
	for i := range reps {
		reps[i] = []string{"b", "c"}
	}
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", owners, reps...))
		createReplicated(t, st, "other", false, replicated("other", []string{"c"}, []string{"b", "c"}))
	})
	if a := assignment(t, r.st, "orders", 0); a.Owner != "c" {
		t.Fatalf("orders/0 = %+v after a pass, want c still (2 of 21 is not imbalanced)", a)
	}
	for _, bad := range []struct {
		req  ElectRequest
		want error
	}{
		{ElectRequest{Preferred: true, Partition: 0}, meta.ErrInvalid},
		{ElectRequest{Preferred: true, Topic: "nope", Partition: -1}, meta.ErrNotFound},
		{ElectRequest{Preferred: true, Topic: "orders", Partition: 20}, meta.ErrNotFound},
	} {
		if _, err := r.ctl.ElectLeaders(ctxT(t), bad.req); !errors.Is(err, bad.want) {
			t.Fatalf("ElectLeaders(%+v) = %v, want %v", bad.req, err, bad.want)
		}
	}
	got, err := r.ctl.ElectLeaders(ctxT(t), ElectRequest{Preferred: true, Topic: "orders", Partition: 3})
	if err != nil || len(got) != 0 {
		t.Fatalf("preferred election of orders/3 (led by b) = %+v, %v; want none", got, err)
	}
	got, err = r.ctl.ElectLeaders(ctxT(t), ElectRequest{Preferred: true, Topic: "orders", Partition: -1})
	want := []Election{{Topic: "orders", Partition: 0, From: "c", To: "b", Reason: meta.ElectPreferred, Epoch: 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("preferred election of orders = %+v, %v; want %+v", got, err, want)
	}
	if a := assignment(t, r.st, "other", 0); a.Owner != "c" {
		t.Fatalf("other/0 = %+v: outside the request, want c still", a)
	}
	if r.elections(meta.ElectPreferred) != 1 {
		t.Fatalf("preferred elections counted = %v, want 1", r.elections(meta.ElectPreferred))
	}
}

// Without preferred, an operator's election is the failover planner run now, clean only: a
// failed leader gets its first live in-sync replica; a partition that could only be elected
// unclean waits.
func TestElectLeadersFailoverIsCleanOnly(t *testing.T) {
	r := newElectionRig(t, func(st *meta.Store) {
		createReplicated(t, st, "orders", false, replicated("orders", nil, []string{"b", "c", "d"}))
		createReplicated(t, st, "loose", true, replicated("loose", nil, []string{"b", "c", "d"}))
		setISR(t, st, "loose", 0, "b")
	})
	r.c.advance(DefaultReplicaFailoverAfter+time.Second, "a", "c", "d")
	got, err := r.ctl.ElectLeaders(ctxT(t), ElectRequest{Partition: -1})
	want := []Election{{Topic: "orders", Partition: 0, From: "b", To: "c", Reason: meta.ElectDead, Epoch: 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ElectLeaders = %+v, %v; want %+v", got, err, want)
	}
	if a := assignment(t, r.st, "loose", 0); a.Owner != "b" || a.LeaderEpoch != 0 {
		t.Fatalf("loose/0 = %+v, want b still: an operator's election is never unclean", a)
	}
}
