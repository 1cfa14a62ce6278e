package client

import (
	"context"
	"strings"
	"testing"
)

// ElectLeaders sends only the fields set, decodes the elections, and never answers nil.
func TestElectLeadersSendsTheRequestAndDecodesElections(t *testing.T) {
	f := newFake(t, 200, `{"elections":[{"topic":"orders","partition":2,"from":"n2","to":"n1","reason":"preferred","epoch":5}]}`)
	p := 2
	es, err := f.client(t).ElectLeaders(context.Background(), ElectLeadersRequest{Preferred: true, Topic: "orders", Partition: &p})
	want := Election{Topic: "orders", Partition: 2, From: "n2", To: "n1", Reason: "preferred", Epoch: 5}
	if err != nil || len(es) != 1 || es[0] != want {
		t.Fatalf("ElectLeaders = %+v, %v; want [%+v]", es, err, want)
	}
	if got := f.last(t); got.Method != "POST" || got.Raw != "/v1/cluster/elect-leaders" ||
		strings.TrimSpace(got.Body) != `{"preferred":true,"topic":"orders","partition":2}` {
		t.Fatalf("request %+v", got)
	}
	f.body = `{}`
	if es, err := f.client(t).ElectLeaders(context.Background(), ElectLeadersRequest{}); err != nil || es == nil || len(es) != 0 {
		t.Fatalf("no elections: %#v %v", es, err)
	}
	if got := f.last(t); strings.TrimSpace(got.Body) != `{}` {
		t.Fatalf("an empty request sent %q", got.Body)
	}
	f.status, f.body = 404, `{"error":"topic \"x\": not found"}`
	if _, err := f.client(t).ElectLeaders(context.Background(), ElectLeadersRequest{Topic: "x"}); !IsStatus(err, 404) {
		t.Fatalf("404: %v", err)
	}
}
