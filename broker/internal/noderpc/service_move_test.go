package noderpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// fakeSource is a MoveSource answering with fixed values and recording its last request.
type fakeSource struct {
	mu      sync.Mutex
	listing transfer.Listing
	data    []byte
	err     error
	prep    transfer.PrepareRequest
	fetchN  int
	fetchAt int64
}

func (f *fakeSource) TransferListing(context.Context, string, int) (transfer.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listing, f.err
}

func (f *fakeSource) ReadSegmentChunk(_ context.Context, _ string, _ int, _, at int64, buf []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetchN, f.fetchAt = len(buf), at
	if f.err != nil {
		return 0, f.err
	}
	return copy(buf, f.data), nil
}

// seen returns the last fetch size and position and the last prepare request.
func (f *fakeSource) seen() (n int, at int64, prep transfer.PrepareRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetchN, f.fetchAt, f.prep
}

func (f *fakeSource) PrepareHandoff(_ context.Context, _ string, _ int, req transfer.PrepareRequest) (transfer.Listing, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prep = req
	return f.listing, f.err
}

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

// fakeDecom is a Decommissioner: known members, fixed up-front reasons, a removed set.
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

func (f *fakeDecom) isDraining(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining[id]
}

func testDeps(src MoveSource, rep MoveReporter, d Decommissioner) MoveDeps {
	return MoveDeps{Source: src, Reporter: rep, Decom: d}
}

func TestTransferErrorsMapToTheirNodePlaneStatus(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		wantStatus int32
		wantReason string
	}{
		{"ok", nil, 200, ""},
		{"engine not owner", fmt.Errorf("p3: %w", errcode.ErrNotOwner), 421, "not_owner"},
		{"transfer not owner", transfer.ErrNotOwner, 421, "not_owner"},
		{"topic gone", fmt.Errorf("x: %w", errcode.ErrTopicGone), 404, "topic_gone"},
		{"api not found", errcode.ErrNotFound, 404, "not_found"},
		{"transfer not found", transfer.ErrNotFound, 404, "not_found"},
		{"invalid", fmt.Errorf("%w: no such segment position", errcode.ErrInvalid), 400, "invalid"},
		{"freeze lapsed", fmt.Errorf("arm: %w", transfer.ErrFreezeLapsed), 409, "freeze_lapsed"},
		{"unknown token", transfer.ErrUnknownToken, 409, "unknown_token"},
		{"hwm mismatch", fmt.Errorf("fence: %w", transfer.ErrHWMMismatch), 409, "hwm_mismatch"},
		{"disk error", errors.New("read: input/output error"), 503, ""},
		{"unavailable", errcode.ErrUnavailable, 503, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, reason, _ := errcode.Source.Reply(tc.err)
			if st != tc.wantStatus || string(reason) != tc.wantReason {
				t.Fatalf("status %d reason %q, want %d %q", st, reason, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestMoveOpsAnswer503WhenNotWiredAnd400OnBadRequests(t *testing.T) {
	ctx := context.Background()
	bare := &Service{}
	if r, _ := bare.ListPartitionSegments(ctx, &nodepb.ListPartitionSegmentsRequest{Topic: "t"}); r.Status != 503 {
		t.Fatalf("op 22 unwired: %d", r.Status)
	}
	if r, _ := bare.FetchSegmentChunk(ctx, &nodepb.FetchSegmentChunkRequest{Topic: "t", Len: 1}); r.Status != 503 {
		t.Fatalf("op 23 unwired: %d", r.Status)
	}
	if r, _ := bare.PrepareHandoff(ctx, &nodepb.PrepareHandoffRequest{Topic: "t"}); r.Status != 503 {
		t.Fatalf("op 24 unwired: %d", r.Status)
	}
	if r, _ := bare.MoveReport(ctx, &nodepb.MoveReportRequest{Topic: "t"}); r.Status != 503 {
		t.Fatalf("op 30 unwired: %d", r.Status)
	}
	s := &Service{mv: testDeps(&fakeSource{}, fakeReporter{}, nil)}
	bad := []struct {
		name string
		call func() int32
	}{
		{"op 22 no topic", func() int32 {
			r, _ := s.ListPartitionSegments(ctx, &nodepb.ListPartitionSegmentsRequest{})
			return r.Status
		}},
		{"op 22 negative partition", func() int32 {
			r, _ := s.ListPartitionSegments(ctx, &nodepb.ListPartitionSegmentsRequest{Topic: "t", Partition: -1})
			return r.Status
		}},
		{"op 23 zero len", func() int32 {
			r, _ := s.FetchSegmentChunk(ctx, &nodepb.FetchSegmentChunkRequest{Topic: "t"})
			return r.Status
		}},
		{"op 23 negative at", func() int32 {
			r, _ := s.FetchSegmentChunk(ctx, &nodepb.FetchSegmentChunkRequest{Topic: "t", At: -1, Len: 5})
			return r.Status
		}},
		{"op 24 negative ttl", func() int32 {
			r, _ := s.PrepareHandoff(ctx, &nodepb.PrepareHandoffRequest{Topic: "t", TtlMs: -1})
			return r.Status
		}},
		{"op 24 fence without token", func() int32 {
			r, _ := s.PrepareHandoff(ctx, &nodepb.PrepareHandoffRequest{Topic: "t", Fence: true})
			return r.Status
		}},
		{"op 30 no topic", func() int32 { r, _ := s.MoveReport(ctx, &nodepb.MoveReportRequest{}); return r.Status }},
	}
	for _, b := range bad {
		if st := b.call(); st != 400 {
			t.Fatalf("%s: status %d, want 400", b.name, st)
		}
	}
}

func TestFetchChunkIsClampedToTheChunkSize(t *testing.T) {
	src := &fakeSource{data: []byte("abc")}
	s := &Service{mv: testDeps(src, nil, nil)}
	r, _ := s.FetchSegmentChunk(context.Background(), &nodepb.FetchSegmentChunkRequest{Topic: "t", At: 7, Len: 1 << 30})
	if n, at, _ := src.seen(); r.Status != 200 || string(r.Data) != "abc" || n != transfer.ChunkBytes || at != 7 {
		t.Fatalf("status %d data %q asked n=%d at=%d", r.Status, r.Data, n, at)
	}
	// A source handing back more than asked never ships the excess.
	src.data = []byte("0123456789")
	if r, _ := s.FetchSegmentChunk(context.Background(), &nodepb.FetchSegmentChunkRequest{Topic: "t", Len: 4}); string(r.Data) != "0123" {
		t.Fatalf("over-long read shipped %q", r.Data)
	}
}

func TestPrepareHandoffPassesTheRequestAndTheRefusalReason(t *testing.T) {
	src := &fakeSource{err: fmt.Errorf("fence: %w", transfer.ErrHWMMismatch)}
	s := &Service{mv: testDeps(src, nil, nil)}
	r, _ := s.PrepareHandoff(context.Background(), &nodepb.PrepareHandoffRequest{Topic: "t", Partition: 2, TtlMs: 1500,
		Token: "tok", Fence: true, ExpectHwm: 42})
	if r.Status != 409 || r.Reason != "hwm_mismatch" {
		t.Fatalf("status %d reason %q", r.Status, r.Reason)
	}
	want := transfer.PrepareRequest{Token: "tok", Fence: true, ExpectHWM: 42, TTL: 1500 * time.Millisecond}
	if _, _, got := src.seen(); got != want {
		t.Fatalf("request %+v, want %+v", got, want)
	}
}

func TestMoveReportIs404WithoutAWorker(t *testing.T) {
	s := &Service{mv: testDeps(nil, fakeReporter{topic: "t", p: 1, rep: transfer.Report{Phase: transfer.PhaseCopying, Passes: 3}}, nil)}
	if r, _ := s.MoveReport(context.Background(), &nodepb.MoveReportRequest{Topic: "t", Partition: 2}); r.Status != 404 {
		t.Fatalf("no worker: %d", r.Status)
	}
	r, _ := s.MoveReport(context.Background(), &nodepb.MoveReportRequest{Topic: "t", Partition: 1})
	var rep transfer.Report
	if r.Status != 200 || json.Unmarshal(r.ReportJson, &rep) != nil || rep.Passes != 3 || rep.Phase != transfer.PhaseCopying {
		t.Fatalf("status %d report %s", r.Status, r.ReportJson)
	}
}

// Op 25 on a real single-node leader: every documented status.
func TestDecommissionMemberStatusesOnTheLeader(t *testing.T) {
	svc, _, _ := newNodeService(t)
	d := newFakeDecom()
	d.reasons["n3"] = []string{controller.ReasonMinVoters}
	d.removed["n2"] = true
	d.blocked = map[string][]string{"n1": {controller.ReasonIngressBacklog}}
	svc.mv = testDeps(nil, nil, d)
	ctx := context.Background()
	call := func(req *nodepb.DecommissionMemberRequest) *nodepb.DecommissionMemberReply {
		t.Helper()
		r, err := svc.DecommissionMember(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	verdict := func(r *nodepb.DecommissionMemberReply) controller.Verdict {
		t.Helper()
		var v controller.Verdict
		if err := json.Unmarshal(r.VerdictJson, &v); err != nil {
			t.Fatalf("verdict %q: %v", r.VerdictJson, err)
		}
		return v
	}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n3", DryRun: true}); r.Status != 200 || verdict(r).Allowed || verdict(r).Reasons[0] != "min_voters" {
		t.Fatalf("dry run of a refused node: %d %s", r.Status, r.VerdictJson)
	}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n3"}); r.Status != 409 || verdict(r).Reasons[0] != "min_voters" {
		t.Fatalf("refusal: %d %s", r.Status, r.VerdictJson)
	}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n1"}); r.Status != 204 || !d.isDraining("n1") {
		t.Fatalf("start: %d draining=%v", r.Status, d.isDraining("n1"))
	}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n9"}); r.Status != 404 {
		t.Fatalf("unknown member: %d", r.Status)
	}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n1", Cancel: true}); r.Status != 204 || d.isDraining("n1") {
		t.Fatalf("cancel: %d", r.Status)
	}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n2", Cancel: true}); r.Status != 409 {
		t.Fatalf("cancel after removal: %d", r.Status)
	}
	r := call(&nodepb.DecommissionMemberRequest{BlockedOnly: true})
	var blocked map[string][]string
	if r.Status != 200 || json.Unmarshal(r.BlockedJson, &blocked) != nil || blocked["n1"][0] != "ingress_backlog" {
		t.Fatalf("blocked_only: %d %s", r.Status, r.BlockedJson)
	}
	if r := call(&nodepb.DecommissionMemberRequest{}); r.Status != 400 {
		t.Fatalf("no id: %d", r.Status)
	}
	d.err = meta.ErrNoLeader
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n1"}); r.Status != 503 {
		t.Fatalf("no quorum: %d", r.Status)
	}
	d.err = fmt.Errorf("lost it: %w", meta.ErrNotLeader)
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n1"}); r.Status != 421 {
		t.Fatalf("leadership lost mid-call: %d", r.Status)
	}
	svc.mv = MoveDeps{}
	if r := call(&nodepb.DecommissionMemberRequest{Id: "n1"}); r.Status != 503 {
		t.Fatalf("unwired: %d", r.Status)
	}
}
