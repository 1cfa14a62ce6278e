package engine

import (
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/service"
)

// switchablePeer is a fakePeers owner whose probes answer empty until serve is set, then one
// message each.
func switchablePeer() (*fakePeers, func(bool)) {
	var mu sync.Mutex
	serve := false
	fp := &fakePeers{}
	fp.onConsume = func(addr string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		if !serve {
			return nil, nil
		}
		return []service.Message{{Topic: "routed", Partition: 1, Offset: 0, Payload: []byte("remote"), ReceiptHandle: "1:0:1"}}, nil
	}
	return fp, func(v bool) { mu.Lock(); serve = v; mu.Unlock() }
}

func TestLongPollSkipsAnOwnerJustFoundDrainedUntilANoticeComes(t *testing.T) {
	old := reprobeInterval
	reprobeInterval = time.Hour // marks stay fresh and no timer re-probe runs during the test
	t.Cleanup(func() { reprobeInterval = old })
	fp, serve := switchablePeer()
	n, top := twoNodeTopic(t, fp)

	// A non-blocking consume always probes; finding n2 empty marks it drained.
	if msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1}); err != nil || len(msgs) != 0 {
		t.Fatalf("consume = %+v, %v; want nothing", msgs, err)
	}
	if calls := fp.consumeCalls(); len(calls) != 1 {
		t.Fatalf("probes = %d, want 1", len(calls))
	}

	// A long-poll parks without probing n2 again, and takes a local commit when it comes.
	done := make(chan []service.Message, 1)
	go func() {
		msgs, _ := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: 2 * time.Hour})
		done <- msgs
	}()
	waitGoroutine(t, "select", "park")
	if calls := fp.consumeCalls(); len(calls) != 1 {
		t.Fatalf("a long-poll probed an owner found drained just before: %d probes", len(calls))
	}
	n.mustCommit(top, 0, "local")
	if msgs := <-done; len(msgs) != 1 || string(msgs[0].Payload) != "local" {
		t.Fatalf("long-poll = %+v, want the local message", msgs)
	}

	// A notice for the topic ends the mark: the next long-poll probes n2 on its first pass.
	serve(true)
	n.e.RemoteNotice(top.Name, 1)
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: 2 * time.Hour})
	if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "remote" {
		t.Fatalf("consume after a notice = %+v, %v; want n2's message", msgs, err)
	}
	if calls := fp.consumeCalls(); len(calls) != 2 {
		t.Fatalf("probes = %d, want 2", len(calls))
	}
}

func TestLongPollProbesADrainedOwnerOnceTheMarkExpires(t *testing.T) {
	old := reprobeInterval
	reprobeInterval = 100 * time.Millisecond
	t.Cleanup(func() { reprobeInterval = old })
	fp, serve := switchablePeer()
	n, top := twoNodeTopic(t, fp)
	if msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1}); err != nil || len(msgs) != 0 {
		t.Fatalf("consume = %+v, %v; want nothing", msgs, err)
	}
	// n2 now has a message no notice announced (as when a long-poll there took part of a
	// commit): a long-poll here finds it when the mark expires, long before its wait ends.
	serve(true)
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: time.Hour})
	if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "remote" {
		t.Fatalf("consume = %+v, %v; want n2's message", msgs, err)
	}
}

func TestShortLongPollsAndFailedProbesLeaveNoMark(t *testing.T) {
	old := reprobeInterval
	reprobeInterval = time.Hour
	t.Cleanup(func() { reprobeInterval = old })
	fp, _ := switchablePeer()
	n, top := twoNodeTopic(t, fp)
	if _, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1}); err != nil {
		t.Fatal(err)
	}
	// A long-poll shorter than the re-probe interval probes on its first pass regardless.
	if _, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if calls := fp.consumeCalls(); len(calls) != 2 {
		t.Fatalf("probes = %d, want 2", len(calls))
	}
	var d drainedOwners
	at := time.Now()
	d.note("t", "n2", true, at, 3, time.Second)
	if _, ok := d.fresh("t", "n2", 3, at, time.Second); !ok {
		t.Fatal("an empty probe left no mark")
	}
	if _, ok := d.fresh("t", "n2", 4, at, time.Second); ok {
		t.Fatal("a mark outlived a notice")
	}
	if _, ok := d.fresh("t", "n2", 3, at.Add(time.Second), time.Second); ok {
		t.Fatal("a mark outlived its life")
	}
	d.note("t", "n2", false, at, 3, time.Second) // a failure or messages
	if _, ok := d.fresh("t", "n2", 3, at, time.Second); ok {
		t.Fatal("a failed probe kept the mark")
	}
}

func TestDrainMarksAreBounded(t *testing.T) {
	var d drainedOwners
	at := time.Now()
	for i := range maxDrainMarks + 10 {
		d.note("t", string(rune('a'+i%26))+string(rune(i)), true, at, 0, time.Second)
	}
	if len(d.marks) != maxDrainMarks {
		t.Fatalf("%d marks, want the bound %d", len(d.marks), maxDrainMarks)
	}
	// Once the old marks have expired, a new one replaces them.
	d.note("t", "late", true, at.Add(2*time.Second), 0, time.Second)
	if len(d.marks) != 1 {
		t.Fatalf("%d marks after the expired ones were dropped, want 1", len(d.marks))
	}
}
