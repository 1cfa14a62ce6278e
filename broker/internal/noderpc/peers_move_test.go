package noderpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

var loopSecret = []byte("peers-move-test-secret")

// serveLoopback serves impl on a real cluster port on 127.0.0.1 (mux + gRPC + proof of
// secret) and returns its address and a peers client; everything stops at cleanup.
func serveLoopback(t testing.TB, impl nodepb.NodeServer) (string, Peers) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := rpc.NewMux(ln, loopSecret, nil)
	srv := rpc.NewServer(loopSecret, impl, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(mux) }()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- mux.Run(ctx) }()
	pool := rpc.NewPool(loopSecret)
	t.Cleanup(func() {
		_ = pool.Close()
		srv.Stop()
		cancel()
		_ = mux.Close()
		<-ran
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Logf("grpc serve: %v", err)
		}
	})
	return ln.Addr().String(), Peers{pool: pool}
}

func sampleListing() transfer.Listing {
	return transfer.Listing{
		Segments:        []transfer.Segment{{Base: 0, Size: 4096, Sealed: true, MtimeMs: 1_700_000_000_000}, {Base: 50, Size: 10}},
		ListedAtMs:      1_700_000_000_500,
		HighWatermark:   52,
		OldestOffset:    0,
		CommittedOffset: 40,
		HasCommitted:    true,
		AckedAhead:      []int64{43, 47},
		Cursors:         []transfer.Cursor{{Child: "audit", Record: []byte{0, 1, 2, 0xff}}},
		Marker:          transfer.EncodeMarker(transfer.Marker{Topic: "t", From: "n1", To: "n2", HWM: 9}),
		Incarnation:     "0123456789abcdef",
		Token:           "feedface",
	}
}

func TestTransferSourceRoundTripKeepsTheListingAndStampsArrival(t *testing.T) {
	src := &fakeSource{listing: sampleListing(), data: []byte("frames")}
	addr, p := serveLoopback(t, &Service{mv: testDeps(src, nil, nil)})
	ts := NewTransferSource(p)
	ctx := context.Background()
	before := time.Now()
	l, err := ts.List(ctx, addr, "t", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleListing()
	if l.ReceivedAt.Before(before) || l.ReceivedAt.After(time.Now()) {
		t.Fatalf("ReceivedAt %v not stamped on arrival", l.ReceivedAt)
	}
	if l.HighWatermark != want.HighWatermark || len(l.Segments) != 2 || l.Segments[0] != want.Segments[0] ||
		!bytes.Equal(l.Cursors[0].Record, want.Cursors[0].Record) || !bytes.Equal(l.Marker, want.Marker) ||
		l.AckedAhead[1] != 47 || !l.HasCommitted || l.Incarnation != want.Incarnation || l.ListedAtMs != want.ListedAtMs {
		t.Fatalf("listing changed on the wire: %+v", l)
	}
	b, err := ts.Fetch(ctx, addr, "t", 3, 50, 4, 100)
	if n, at, _ := src.seen(); err != nil || string(b) != "frames" || n != 100 || at != 4 {
		t.Fatalf("fetch %q %v (n=%d at=%d)", b, err, n, at)
	}
	l, err = ts.Prepare(ctx, addr, "t", 3, transfer.PrepareRequest{Token: "feedface", TTL: 2 * time.Second})
	if err != nil || l.Token != "feedface" || l.ReceivedAt.IsZero() {
		t.Fatalf("prepare %+v %v", l, err)
	}
	if _, _, prep := src.seen(); prep.TTL != 2*time.Second || prep.Token != "feedface" || prep.Fence {
		t.Fatalf("prepare request arrived as %+v", prep)
	}
}

func TestTransferSourceMapsEveryStatusToATransferSentinel(t *testing.T) {
	src := &fakeSource{}
	addr, p := serveLoopback(t, &Service{mv: testDeps(src, nil, nil)})
	ts := NewTransferSource(p)
	ctx := context.Background()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"not owner", errcode.ErrNotOwner, transfer.ErrNotOwner},
		{"topic gone", errcode.ErrTopicGone, transfer.ErrNotFound},
		{"freeze lapsed", transfer.ErrFreezeLapsed, transfer.ErrFreezeLapsed},
		{"unknown token", transfer.ErrUnknownToken, transfer.ErrUnknownToken},
		{"hwm mismatch", transfer.ErrHWMMismatch, transfer.ErrHWMMismatch},
		{"disk", errors.New("eio"), transfer.ErrUnavailable},
		{"bad request", errcode.ErrInvalid, transfer.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src.mu.Lock()
			src.err = fmt.Errorf("wrapped: %w", tc.err)
			src.mu.Unlock()
			_, err := ts.Prepare(ctx, addr, "t", 0, transfer.PrepareRequest{Token: "x", Fence: true, ExpectHWM: 1})
			if !errors.Is(err, tc.want) {
				t.Fatalf("prepare: %v, want %v", err, tc.want)
			}
			if transfer.FenceRefused(tc.want) {
				return // 409s are PrepareHandoff's alone
			}
			if _, err := ts.List(ctx, addr, "t", 0); !errors.Is(err, tc.want) {
				t.Fatalf("list: %v, want %v", err, tc.want)
			}
			if _, err := ts.Fetch(ctx, addr, "t", 0, 0, 0, 10); !errors.Is(err, tc.want) {
				t.Fatalf("fetch: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestTransferSourceUnreachableIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more
	pool := rpc.NewPool(loopSecret)
	defer pool.Close()
	ts := NewTransferSource(Peers{pool: pool})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := ts.List(ctx, addr, "t", 0); !errors.Is(err, transfer.ErrUnavailable) {
		t.Fatalf("list of a dead source: %v", err)
	}
	if _, err := ts.List(ctx, "", "t", 0); !errors.Is(err, transfer.ErrUnavailable) {
		t.Fatalf("list with no address: %v", err)
	}
}

func TestPrepareCallGetsTheLeaseDrainOnTopOfTheDefaultDeadline(t *testing.T) {
	rec := &deadlineNode{}
	addr, p := serveLoopback(t, rec)
	if _, err := NewTransferSource(p).Prepare(context.Background(), addr, "t", 0, transfer.PrepareRequest{}); err != nil {
		t.Fatal(err)
	}
	got := time.Duration(rec.remaining.Load())
	if got <= rpc.DefaultCallTimeout || got > prepareCallTimeout {
		t.Fatalf("PrepareHandoff arrived with %v left, want (%v, %v]", got, rpc.DefaultCallTimeout, prepareCallTimeout)
	}
}

// deadlineNode records the deadline PrepareHandoff arrived with.
type deadlineNode struct {
	nodepb.UnimplementedNodeServer
	remaining atomic.Int64
}

func (d *deadlineNode) PrepareHandoff(ctx context.Context, _ *nodepb.PrepareHandoffRequest) (*nodepb.PrepareHandoffReply, error) {
	if dl, ok := ctx.Deadline(); ok {
		d.remaining.Store(int64(time.Until(dl)))
	}
	return &nodepb.PrepareHandoffReply{Status: 200, ListingJson: []byte(`{"token":"t"}`)}, nil
}

func TestMoveReportRoundTrip(t *testing.T) {
	rep := transfer.Report{ReportedBy: "n2", Phase: transfer.PhaseBlocked, Passes: 4, CopiedBytes: 1 << 20,
		SourceHWM: 99, CopyNextOffset: 90, BlockedReason: transfer.BlockedCopyUnverifiable, LastError: "verify", StartedAt: 1_700_000_000}
	addr, p := serveLoopback(t, &Service{mv: testDeps(nil, fakeReporter{topic: "t", p: 1, rep: rep}, nil)})
	got, err := p.MoveReport(context.Background(), addr, "t", 1)
	if err != nil || got != rep {
		t.Fatalf("report %+v %v", got, err)
	}
	if _, err := p.MoveReport(context.Background(), addr, "t", 2); !errors.Is(err, errcode.ErrNotFound) {
		t.Fatalf("no worker: %v", err)
	}
}

func TestDecommissionMemberRoundTripAndAnOlderLeader(t *testing.T) {
	svc, _, _ := newNodeService(t)
	d := newFakeDecom()
	d.reasons["n3"] = []string{"no_receivers", "dead_owner"}
	svc.mv = testDeps(nil, nil, d)
	addr, p := serveLoopback(t, svc)
	ctx := context.Background()
	res, err := p.DecommissionMember(ctx, addr, DecomCall{ID: "n3"})
	if err != nil || res.Status != 409 || len(res.Verdict.Reasons) != 2 || res.Verdict.Node != "n3" {
		t.Fatalf("refusal over the wire: %+v %v", res, err)
	}
	res, err = p.DecommissionMember(ctx, addr, DecomCall{BlockedOnly: true})
	if err != nil || res.Status != 200 || res.Blocked == nil {
		t.Fatalf("blocked_only with nothing blocked: %+v %v (want an empty map)", res, err)
	}
	// Forced: the lose list travels; the answer is 200 with the lost partitions, or 409 with
	// the missing ones.
	lose := []controller.PartitionRef{{Topic: "orders", Partition: 0}}
	res, err = p.DecommissionMember(ctx, addr, DecomCall{ID: "n3", Force: true, Lose: lose})
	if err != nil || res.Status != 200 || len(res.Verdict.Lost) != 1 || res.Verdict.Lost[0].NewOwner != "n1" || !d.isDraining("n3") {
		t.Fatalf("forced over the wire: %+v %v", res, err)
	}
	res, err = p.DecommissionMember(ctx, addr, DecomCall{ID: "n3", Force: true})
	if err != nil || res.Status != 409 || !reflect.DeepEqual(res.Verdict.Missing, lose) {
		t.Fatalf("forced without the list over the wire: %+v %v", res, err)
	}
	res, err = p.DecommissionMember(ctx, addr, DecomCall{ID: "n3", Force: true, DryRun: true})
	if err != nil || res.Status != 400 {
		t.Fatalf("forced dry run over the wire: %+v %v", res, err)
	}
	// A leader running a release without op 25 answers Unimplemented.
	oldAddr, p2 := serveLoopback(t, &nodepb.UnimplementedNodeServer{})
	if _, err := p2.DecommissionMember(ctx, oldAddr, DecomCall{BlockedOnly: true}); !errors.Is(err, ErrPeerTooOld) || !errors.Is(err, meta.ErrNoLeader) {
		t.Fatalf("older leader: %v", err)
	}
}

func FuzzDecodeLose(f *testing.F) {
	for _, s := range []string{"", "null", "[]", `[{"topic":"t","partition":1}]`, `[{"topic":"","partition":1}]`,
		`[{"topic":"t","partition":-1}]`, `{}`, `[{"topic":"t","partition":1.5}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := decodeLose(b)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.Topic == "" || r.Partition < 0 {
				t.Fatalf("%q accepted %+v", b, r)
			}
		}
	})
}

func FuzzDecodeListing(f *testing.F) {
	f.Add([]byte(`{"segments":[{"base_offset":0,"size_bytes":10,"sealed":true}],"high_watermark":3,"incarnation":"x"}`))
	f.Add([]byte(`{"token":"abc","expires_in":7500,"high_watermark":12}`))
	f.Add([]byte(`{"fanout_cursors":[{"child":"c","record":"AAEC"}],"move_marker":"e30="}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeListing("peer", b)
		if err != nil {
			if !errors.Is(err, transfer.ErrUnavailable) {
				t.Fatalf("decode error %v does not wrap ErrUnavailable", err)
			}
			return
		}
		if l.ReceivedAt.IsZero() {
			t.Fatal("a decoded listing has no arrival stamp")
		}
		// What decodes re-encodes to a listing that decodes the same.
		again, err := decodeListing("peer", mustJSON(t, l))
		if err != nil || again.HighWatermark != l.HighWatermark || len(again.Segments) != len(l.Segments) ||
			again.Token != l.Token || !bytes.Equal(again.Marker, l.Marker) || len(again.Cursors) != len(l.Cursors) {
			t.Fatalf("re-encode changed the listing: %+v vs %+v (%v)", again, l, err)
		}
	})
}
