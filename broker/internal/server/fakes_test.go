package server

// Fakes of the move and decommission objects behind the cluster endpoints (the node RPC
// service's tests have their own).

import (
	"context"
	"fmt"
	"sync"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
	"narad.dev/broker/internal/transfer"
)

// fakeReporter reports one move.
type fakeReporter struct {
	topic string
	p     int
	rep   transfer.Report
}

func (f fakeReporter) Report(topic string, p int) (transfer.Report, bool) {
	if topic != f.topic || p != f.p {
		return transfer.Report{}, false
	}
	return f.rep, true
}

// fakeDecom is a noderpc.Decommissioner: known members, fixed up-front reasons, a removed set.
type fakeDecom struct {
	mu       sync.Mutex
	members  map[string]bool
	reasons  map[string][]string // up-front reasons per node: refused when non-empty
	removed  map[string]bool
	blocked  map[string][]string
	err      error // returned by every call when set
	draining map[string]bool
}

func newFakeDecom() *fakeDecom {
	return &fakeDecom{members: map[string]bool{"n1": true, "n2": true, "n3": true, "n4": true}, reasons: map[string][]string{},
		removed: map[string]bool{}, blocked: map[string][]string{}, draining: map[string]bool{}}
}

func (f *fakeDecom) Decommission(_ context.Context, id string, dryRun bool) (controller.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return controller.Verdict{}, f.err
	}
	if !f.members[id] {
		return controller.Verdict{}, fmt.Errorf("member %s: %w", id, meta.ErrNotFound)
	}
	v := controller.Verdict{Node: id, Allowed: len(f.reasons[id]) == 0, Reasons: f.reasons[id]}
	switch {
	case dryRun:
		return v, nil
	case !v.Allowed:
		return v, fmt.Errorf("%w: %v", controller.ErrRefused, v.Reasons)
	}
	f.draining[id] = true
	return v, nil
}

// DecommissionForce refuses a member with up-front reasons other than dead_owner, a lose list
// not naming "orders/0" (409 with it missing), and otherwise answers that partition as lost
// to "n1".
func (f *fakeDecom) DecommissionForce(_ context.Context, id string, lose []controller.PartitionRef) (controller.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return controller.Verdict{}, f.err
	}
	if !f.members[id] {
		return controller.Verdict{}, fmt.Errorf("member %s: %w", id, meta.ErrNotFound)
	}
	want := controller.PartitionRef{Topic: "orders", Partition: 0}
	v := controller.Verdict{Node: id, Reasons: []string{controller.ReasonDeadOwner}}
	if len(lose) != 1 || lose[0] != want {
		v.Missing = []controller.PartitionRef{want}
		return v, fmt.Errorf("%w: missing orders/0", controller.ErrRefused)
	}
	f.draining[id] = true
	return controller.Verdict{Node: id, Allowed: true, Reasons: []string{},
		Lost: []controller.LostPartition{{Topic: "orders", Partition: 0, Owner: id, NewOwner: "n1", LeaderEpoch: 1}}}, nil
}

func (f *fakeDecom) CancelDecommission(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.err != nil:
		return f.err
	case !f.members[id]:
		return fmt.Errorf("member %s: %w", id, meta.ErrNotFound)
	case f.removed[id]:
		return fmt.Errorf("member %s: %w", id, controller.ErrRemoved)
	}
	delete(f.draining, id)
	return nil
}

func (f *fakeDecom) DecommissionBlocked() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}

func testDeps(src noderpc.MoveSource, rep noderpc.MoveReporter, d noderpc.Decommissioner) noderpc.MoveDeps {
	return noderpc.MoveDeps{Source: src, Reporter: rep, Decom: d}
}

func (f *fakeDecom) isDraining(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining[id]
}
