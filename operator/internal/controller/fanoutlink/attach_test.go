package fanoutlink

import (
	"testing"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

func TestSameLinkRefusesAnotherDelay(t *testing.T) {
	spec := naradv1.FanoutLinkSpec{Parent: "p", Child: "c", DelayMs: 1000}
	if ok, _, _ := sameLink(spec, client.ChildLink{Name: "c", DelayMs: 1000}); !ok {
		t.Fatal("same delay must be adopted")
	}
	if ok, reason, _ := sameLink(spec, client.ChildLink{Name: "c", DelayMs: 0}); ok || reason != "DelayMismatch" {
		t.Fatalf("other delay: ok %v reason %q", ok, reason)
	}
}

func TestAttachableKeepsFanoutOneLevelDeepAndSingleParent(t *testing.T) {
	cases := []struct {
		child  client.Topic
		reason string
	}{
		{client.Topic{Name: "c", Role: client.RoleStandalone}, ""},
		{client.Topic{Name: "c", Role: client.RoleChild, Parent: "elsewhere"}, "AttachedElsewhere"},
		{client.Topic{Name: "c", Role: client.RoleParent, Children: []string{"g"}}, "ChildIsParent"},
	}
	for _, c := range cases {
		ok, reason, _ := attachable(c.child)
		if ok != (c.reason == "") || reason != c.reason {
			t.Errorf("attachable(%+v) = %v %q, want reason %q", c.child, ok, reason, c.reason)
		}
	}
}

func TestChildCreateRequestInheritsPartitionsUnlessSet(t *testing.T) {
	req := childCreateRequest(naradv1.FanoutLinkSpec{Parent: "p", Child: "c", DelayMs: 5})
	if req.Name != "c" || req.Parent != "p" || req.FanoutDelayMs != 5 || req.Partitions != 0 {
		t.Fatalf("inherit: %+v", req)
	}
	n := int32(9)
	if req := childCreateRequest(naradv1.FanoutLinkSpec{Parent: "p", Child: "c", ChildPartitions: &n}); req.Partitions != 9 {
		t.Fatalf("childPartitions: %+v", req)
	}
}
