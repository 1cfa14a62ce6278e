package cluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

func (h *scaleHarness) annotate(value string) {
	h.t.Helper()
	nc := h.cluster()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[naming.ScalePreviewAnnotation] = value
	if err := h.kube.Update(h.ctx, nc); err != nil {
		h.t.Fatal(err)
	}
}

func (h *scaleHarness) previews() float64 {
	return testutil.ToFloat64(scalePreviews.WithLabelValues("narad", h.name))
}

func TestPreviewAnswersEachRequestOnceWithTheBrokersPlan(t *testing.T) {
	const name = "preview"
	h := newScaleHarness(t, name, 4, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 2))
	h.fake.Update(func(c *brokertest.Cluster) {
		c.PlannedMoves = map[string][]client.PlannedMove{
			h.member(3): {{Topic: "orders", Partition: 1, From: h.member(3), To: h.member(0)},
				{Topic: "orders", Partition: 4, From: h.member(3), To: h.member(1)}},
			h.member(2): {{Topic: "events", Partition: 0, From: h.member(2), To: h.member(1)}},
		}
		c.Refuse = map[string][]string{h.member(2): {"min_voters"}}
	})
	h.annotate("2/req-1")
	replicas, _, st := h.step()
	if replicas != 4 {
		t.Fatalf("a preview changed the replicas to %d", replicas)
	}
	p := st.ScalePreview
	if p == nil || p.Request != "2/req-1" || p.Replicas != 2 || p.Allowed || p.Error != "" || p.ObservedAt.IsZero() || len(p.Nodes) != 2 {
		t.Fatalf("preview = %+v", p)
	}
	n3, n2 := p.Nodes[0], p.Nodes[1]
	if n3.NodeID != h.member(3) || !n3.Allowed || len(n3.Moves) != 2 || n3.Moves[1] != (naradv1.PlannedMove{Topic: "orders", Partition: 4, From: h.member(3), To: h.member(1)}) {
		t.Fatalf("node 3 preview = %+v", n3)
	}
	if n2.NodeID != h.member(2) || n2.Allowed || !slices.Equal(n2.Reasons, []string{"min_voters"}) || len(n2.Moves) != 1 {
		t.Fatalf("node 2 preview = %+v", n2)
	}
	if got := h.decommissionCalls("POST", true); !slices.Equal(got, []string{h.member(3), h.member(2)}) {
		t.Fatalf("dry runs %v", got)
	}

	// The same request is not computed again.
	h.step()
	if got := h.decommissionCalls("POST", true); len(got) != 2 || h.previews() != 1 {
		t.Fatalf("dry runs %v, previews %v after a repeat", got, h.previews())
	}
	if got := h.decommissionCalls("POST", false); len(got) != 0 {
		t.Fatalf("a preview decommissioned %v", got)
	}
	if m, _ := h.fake.Member(h.member(3)); m.Draining {
		t.Fatal("a preview marked a node draining")
	}

	// A new request id is: one node this time, allowed.
	h.annotate("3/req-2")
	_, _, st = h.step()
	if p := st.ScalePreview; p.Request != "3/req-2" || !p.Allowed || len(p.Nodes) != 1 || p.Nodes[0].NodeID != h.member(3) {
		t.Fatalf("preview = %+v", p)
	}
	// Growing needs no node.
	h.annotate("6/req-3")
	_, _, st = h.step()
	if p := st.ScalePreview; p.Request != "6/req-3" || !p.Allowed || len(p.Nodes) != 0 || p.Replicas != 6 {
		t.Fatalf("preview = %+v", p)
	}
	if h.previews() != 3 {
		t.Fatalf("previews %v, want 3", h.previews())
	}
	// The annotation removed: the last answer stays.
	nc := h.cluster()
	delete(nc.Annotations, naming.ScalePreviewAnnotation)
	if err := h.kube.Update(h.ctx, nc); err != nil {
		t.Fatal(err)
	}
	if _, _, st = h.step(); st.ScalePreview == nil || st.ScalePreview.Request != "6/req-3" {
		t.Fatalf("preview after the annotation went = %+v", st.ScalePreview)
	}
}

func TestPreviewReportsErrors(t *testing.T) {
	const name = "preview-err"
	h := newScaleHarness(t, name, 4, naradv1.PVCRetentionDelete, scaleMembers(name, 4, 2))
	h.annotate("two/req-1")
	_, _, st := h.step()
	if p := st.ScalePreview; p.Request != "two/req-1" || p.Allowed || !strings.Contains(p.Error, "replicas") {
		t.Fatalf("preview of a bad request = %+v", p)
	}
	h.fake.Update(func(c *brokertest.Cluster) { c.NotReady = true })
	h.annotate("3/req-2")
	_, _, st = h.step()
	if p := st.ScalePreview; p.Request != "3/req-2" || p.Allowed || !strings.Contains(p.Error, "no broker answered") {
		t.Fatalf("preview without brokers = %+v", p)
	}
}
