package plugin

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

// A remote link shows its brokers' id as the child and its remote trouble in the state.
func TestLinkRowOfARemoteLink(t *testing.T) {
	l := &naradv1.FanoutLink{ObjectMeta: metav1.ObjectMeta{Name: "dr", Namespace: "q"},
		Spec: naradv1.FanoutLinkSpec{ClusterRef: naradv1.ClusterReference{Name: "a"}, Parent: "orders",
			Remote: &naradv1.FanoutRemote{URL: "http://b:7942", Topic: "orders-dr"}},
		Status: naradv1.FanoutLinkStatus{State: naradv1.FanoutLinkAttached}}
	if r := linkRowOf(l); r.Child != "remote:orders-dr" || r.tableState() != "Attached" {
		t.Fatalf("before the brokers answered: %+v / %q", r, r.tableState())
	}
	l.Status.LinkID, l.Status.RemoteState = "remote:orders-dr@b:7942", "target_unreachable"
	if r := linkRowOf(l); r.Child != "remote:orders-dr@b:7942" || r.tableState() != "Attached (target_unreachable)" {
		t.Fatalf("attached, target down: %+v / %q", r, r.tableState())
	}
	l.Status.RemoteState = "active"
	if r := linkRowOf(l); r.tableState() != "Attached" {
		t.Fatalf("active: %q", r.tableState())
	}
}
