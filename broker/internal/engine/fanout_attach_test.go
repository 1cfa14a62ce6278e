package engine

import (
	"context"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/service"
)

// docs/internals/fanout.md §5: records committed after the attach point was read but before the
// attach committed sit at or past the recorded offsets, so the child receives them; records
// committed before the reads are not copied.
func TestRecordsCommittedWhileTheAttachIsInFlightAreDelivered(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	parent := n.createTopic(service.CreateTopicRequest{Name: "inflight", Partitions: 3})
	child := n.createTopic(service.CreateTopicRequest{Name: "inflight-child", Partitions: 3})
	n.mustCommit(parent, 0, "before-1", "before-2")
	afterAttachPoint = func() { n.mustCommit(parent, 0, "during-1", "during-2") }
	t.Cleanup(func() { afterAttachPoint = nil })
	if _, err := n.e.AttachChild(n.ctx(), parent.Name, child.Name, 0); err != nil {
		t.Fatal(err)
	}
	afterAttachPoint = nil
	n.mustCommit(parent, 0, "after-1")

	r, err := fanout.NewRunner(fanout.Config{Host: n.e.FanoutHost(), Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	child, _ = n.e.Topic(child.Name)
	got := map[string]int{}
	eventually(t, 10*time.Second, func() bool {
		got = map[string]int{}
		for _, m := range n.replayAll(child) {
			got[string(m.Payload)]++
		}
		return len(got) >= 3
	}, "child holds %v", got)
	for _, want := range []string{"during-1", "during-2", "after-1"} {
		if got[want] == 0 {
			t.Fatalf("child lacks %q: %v", want, got)
		}
	}
	for _, never := range []string{"before-1", "before-2"} {
		if got[never] != 0 {
			t.Fatalf("child received %q, committed before the attach point: %v", never, got)
		}
	}
}

// docs/internals/fanout.md §9: the children listing never opens a partition log; a closed log is
// described from its directory (exact after a clean close).
func TestChildrenListingNeverOpensAClosedParentLog(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	parent := n.createTopic(service.CreateTopicRequest{Name: "quiet", Partitions: 3})
	n.createTopic(service.CreateTopicRequest{Name: "quiet-child", Partitions: 3})
	if _, err := n.e.AttachChild(n.ctx(), parent.Name, "quiet-child", 0); err != nil {
		t.Fatal(err)
	}
	n.mustCommit(parent, 1, "x", "y")
	if pt := n.e.parts.Peek(parent.Name, 1); pt != nil {
		n.e.parts.ClosePartition(pt)
	}
	parent, _ = n.e.Topic(parent.Name)
	ls := n.e.Children(n.ctx(), parent)
	if n.e.parts.Peek(parent.Name, 1) != nil {
		t.Fatal("the children listing opened a closed parent partition log")
	}
	if len(ls) != 1 || ls[0].Name != "quiet-child" {
		t.Fatalf("listing = %+v", ls)
	}
	// No cursor has run yet: every partition reports, but none has a position: incomplete.
	if ls[0].State != service.ChildIncomplete || ls[0].LagComplete {
		t.Fatalf("listing before any cursor ran = %+v, want incomplete", ls[0])
	}
	r := n.e.LocalFanoutCursors(parent, 1)
	if !r.HWMKnown || r.HighWatermark != 2 {
		t.Fatalf("closed partition reported hwm %d known=%v, want 2 from its clean hwm file", r.HighWatermark, r.HWMKnown)
	}
}
