package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// preview answers the narad.dev/scale-preview annotation ("<replicas>/<request id>") in
// st.ScalePreview, once per request: a decommission dry run of every node a scale-down to
// replicas would remove (current-1 down to replicas), changing nothing. The last answer is
// kept in st until another request comes. current is the StatefulSet's replica count; connect
// gives a broker client.
func (r *Reconciler) preview(ctx context.Context, nc *naradv1.NaradCluster, current int32, st *naradv1.NaradClusterStatus,
	connect func(context.Context) (*client.Client, error)) {
	last := st.ScalePreview
	if last == nil && nc.Status.ScalePreview != nil {
		last = nc.Status.ScalePreview.DeepCopy()
	}
	st.ScalePreview = last
	request := nc.Annotations[naming.ScalePreviewAnnotation]
	if request == "" || (last != nil && last.Request == request) {
		return
	}
	registerMetrics()
	p := &naradv1.ScalePreview{Request: request, ObservedAt: metav1.NewTime(r.scaleNow())}
	st.ScalePreview = p
	scalePreviews.WithLabelValues(nc.Namespace, nc.Name).Inc()
	replicas, err := naming.ParseScalePreview(request)
	if err != nil {
		p.Error = err.Error()
		return
	}
	p.Replicas = replicas
	p.Allowed = true
	if replicas >= current {
		return
	}
	cl, err := connect(ctx)
	if err != nil {
		p.Allowed, p.Error = false, "no broker answered: "+err.Error()
		return
	}
	for o := current - 1; o >= replicas; o-- {
		id := naming.NodeID(nc, o)
		v, err := cl.Decommission(ctx, id, true)
		switch {
		case client.IsStatus(err, 404):
			// Not a member (its pod never joined): removing it moves nothing.
			p.Nodes = append(p.Nodes, naradv1.NodePreview{NodeID: id, Allowed: true})
		case err != nil:
			p.Allowed, p.Error = false, fmt.Sprintf("decommission dry run of %s: %v", id, err)
			log.FromContext(ctx).Info("scale preview failed", "node", id, "error", err.Error())
			return
		default:
			np := naradv1.NodePreview{NodeID: id, Allowed: v.Allowed}
			if len(v.Reasons) > 0 {
				np.Reasons = append([]string(nil), v.Reasons...)
			}
			for _, m := range v.Moves {
				np.Moves = append(np.Moves, naradv1.PlannedMove{Topic: m.Topic, Partition: int32(m.Partition), From: m.From, To: m.To})
			}
			p.Nodes = append(p.Nodes, np)
			p.Allowed = p.Allowed && v.Allowed
		}
	}
}
