package noderpc

import (
	"context"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
)

// nodeProber implements controller.Prober over NodeStatus (op 29): what a member says about
// itself, for the promotion check of docs/internals/metastore.md §11 and the decommission backlog guard
// of §8.2.
type nodeProber struct{ p Peers }

// NewProber returns the controller.Prober that asks members over p.
func NewProber(p Peers) controller.Prober { return nodeProber{p} }

// NodeStatus implements controller.Prober.
func (n nodeProber) NodeStatus(ctx context.Context, m meta.Member) (controller.Status, error) {
	rep, err := n.p.NodeStatus(ctx, m.ClusterAddr)
	if err != nil {
		return controller.Status{}, err
	}
	return controller.Status{
		AppliedIndex:        rep.AppliedIndex,
		CaughtUp:            rep.CaughtUp,
		DrainingSeen:        rep.DrainingSeen,
		RefusingProduce:     rep.RefusingProduce,
		AdmittedInflight:    rep.AdmittedInflight,
		IngressUndispatched: rep.IngressUndispatched,
	}, nil
}
