package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"narad.dev/broker/internal/transfer"
)

func TestAbortMoveConflictCarriesOwnerAndTarget(t *testing.T) {
	f := newFake(t, 409, `{"error":"the partition's owner changed to n2","owner":"n2","target":""}`)
	_, err := f.client(t).AbortMove(context.Background(), "a/b", 3, "")
	var e *Error
	if !errors.As(err, &e) || e.Status != 409 || e.Owner != "n2" || e.Target != "" || e.Retryable() {
		t.Fatalf("409: %#v", err)
	}
	if got := f.last(t); got.Raw != "/v1/cluster/moves/a%2Fb/3/abort" || got.Query.Has("target") {
		t.Fatalf("request %+v", got)
	}
	f.status, f.body = 503, `{"error":"abort outcome unknown"}`
	if _, err := f.client(t).AbortMove(context.Background(), "o", 0, "n3"); !errors.As(err, &e) || !e.Retryable() {
		t.Fatalf("503 must be retryable: %v", err)
	}
}

func TestDecommissionRefusalCarriesNodeAndReasons(t *testing.T) {
	f := newFake(t, 409, `{"error":"decommission refused","node":"n4","reasons":["min_voters","no_live_majority"]}`)
	_, err := f.client(t).Decommission(context.Background(), "n4", false)
	var e *Error
	if !errors.As(err, &e) || e.Node != "n4" || len(e.Reasons) != 2 || e.Reasons[1] != "no_live_majority" {
		t.Fatalf("refusal: %#v", err)
	}
	f.status, f.body = 404, `{"error":"member n9: not found"}`
	if err := f.client(t).CancelDecommission(context.Background(), "n9"); !IsStatus(err, 404) {
		t.Fatalf("cancel of an unknown member: %v", err)
	}
}

func TestMovesIsNeverNil(t *testing.T) {
	for _, body := range []string{`{"moves":[]}`, `{}`} {
		f := newFake(t, 200, body)
		mv, err := f.client(t).Moves(context.Background(), false)
		if err != nil || mv == nil || len(mv) != 0 || f.last(t).Query.Has("detail") {
			t.Fatalf("%s: %#v %v", body, mv, err)
		}
	}
}

// The client's MoveDetail reads every field a destination's report carries on the wire.
func TestMoveDetailDecodesTheServersReport(t *testing.T) {
	rep := transfer.Report{ReportedBy: "n2", Phase: transfer.PhaseBlocked, Passes: 7, CopiedBytes: 123,
		SourceHWM: 99, CopyNextOffset: 98, BlockedReason: transfer.BlockedSourceDeadCopyBehind, LastError: "boom", StartedAt: 1_700_000_000}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var d MoveDetail
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	want := MoveDetail{ReportedBy: "n2", Phase: "blocked", Passes: 7, CopiedBytes: 123, SourceHighWatermark: 99,
		CopyNextOffset: 98, BlockedReason: "source_dead_copy_behind", LastError: "boom", StartedAt: 1_700_000_000}
	if d != want {
		t.Fatalf("decoded %+v, want %+v", d, want)
	}
}

// A dry run decodes the planned moves, and an answer without them still yields an empty list.
func TestDecommissionDryRunDecodesThePlannedMoves(t *testing.T) {
	f := newFake(t, 200, `{"node":"n4","dry_run":true,"allowed":true,"reasons":[],"moves":[{"topic":"orders","partition":5,"from":"n4","to":"n1"}]}`)
	v, err := f.client(t).Decommission(context.Background(), "n4", true)
	if err != nil || len(v.Moves) != 1 || v.Moves[0] != (PlannedMove{Topic: "orders", Partition: 5, From: "n4", To: "n1"}) {
		t.Fatalf("dry run: %+v %v", v, err)
	}
	f.body = `{"node":"n4","dry_run":true,"allowed":false,"reasons":["min_voters"]}`
	if v, err = f.client(t).Decommission(context.Background(), "n4", true); err != nil || v.Moves == nil || len(v.Moves) != 0 {
		t.Fatalf("dry run without moves: %+v %v", v, err)
	}
}

func TestDeleteParentTopicNeedsDetachChildren(t *testing.T) {
	f := newFake(t, 409, `{"error":"topic \"p\" has children","children":["c1","c2"]}`)
	err := f.client(t).DeleteTopic(context.Background(), "p")
	var e *Error
	if !errors.As(err, &e) || e.Status != 409 || len(e.Children) != 2 || e.Children[1] != "c2" {
		t.Fatalf("refusal: %#v", err)
	}
	if got := f.last(t); got.Query.Has("detach_children") {
		t.Fatalf("DeleteTopic sent detach_children: %+v", got)
	}
	f.status, f.body = 200, `{"deleted":"p","detached_children":[{"name":"c1","link":"local","delay_ms":60000,"undelivered_messages":7,"undelivered_complete":true}]}`
	d, err := f.client(t).DeleteTopicWith(context.Background(), "p", DeleteTopicOptions{DetachChildren: true})
	if err != nil || d.Deleted != "p" || len(d.DetachedChildren) != 1 || d.DetachedChildren[0].UndeliveredMessages != 7 {
		t.Fatalf("DeleteTopicWith = %+v, %v", d, err)
	}
	if got := f.last(t); got.Query.Get("detach_children") != "true" {
		t.Fatalf("request %+v lacks detach_children=true", got)
	}
	f.status, f.body = 204, ``
	d, err = f.client(t).DeleteTopicWith(context.Background(), "s", DeleteTopicOptions{DetachChildren: true})
	if err != nil || d.Deleted != "s" || d.DetachedChildren == nil || len(d.DetachedChildren) != 0 {
		t.Fatalf("childless DeleteTopicWith = %+v, %v", d, err)
	}
}
