package fanoutlink

import (
	"context"
	"errors"
	"fmt"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// link makes the brokers hold fl's local link (spec.child) and records its state in st. See
// the package comment for the decision order; remote links go through linkRemote.
func (r *Reconciler) link(ctx context.Context, fl *naradv1.FanoutLink, cl *client.Client, st *status) {
	parent, child := fl.Spec.Parent, fl.Spec.Child
	kids, err := cl.Children(ctx, parent)
	if client.IsStatus(err, 404) {
		st.pending("ParentNotFound", fmt.Sprintf("parent topic %q does not exist on the brokers", parent))
		return
	}
	if err != nil {
		st.unknown("BrokerError", fmt.Sprintf("list children of %q: %v", parent, err))
		return
	}
	if l := findChild(kids, child); l != nil {
		if ok, reason, msg := sameLink(fl.Spec, *l); !ok {
			st.failed(reason, msg)
			return
		}
		if fl.Status.Epoch != l.AttachEpoch {
			r.event(fl, "Normal", "Adopted", "Attach", "adopted the existing link %s → %s (epoch %s)", parent, child, l.AttachEpoch)
		}
		st.attached(*l)
		return
	}

	// Not attached: check the child before asking the brokers, for a precise reason.
	ct, err := cl.GetTopic(ctx, child, nil)
	switch {
	case err == nil:
		if ok, reason, msg := attachable(ct.Topic); !ok {
			st.failed(reason, msg)
			return
		}
		_, err = cl.Attach(ctx, parent, child, fl.Spec.DelayMs)
	case client.IsStatus(err, 404) && fl.Spec.CreateChild:
		_, err = cl.CreateTopic(ctx, childCreateRequest(fl.Spec))
	case client.IsStatus(err, 404):
		st.pending("ChildNotFound", fmt.Sprintf("child topic %q does not exist on the brokers (set createChild to make it)", child))
		return
	default:
		st.unknown("BrokerError", fmt.Sprintf("describe child %q: %v", child, err))
		return
	}
	switch {
	case err == nil:
	case client.IsStatus(err, 404):
		st.pending("TopicNotFound", fmt.Sprintf("attach %s → %s: %v", parent, child, err))
		return
	case isRejection(err):
		r.event(fl, "Warning", "AttachFailed", "Attach", "the brokers refused to attach %s → %s: %v", parent, child, err)
		st.failed("AttachRejected", fmt.Sprintf("the brokers refused to attach %q to %q: %v", child, parent, err))
		return
	default:
		st.unknown("BrokerError", fmt.Sprintf("attach %s → %s: %v", parent, child, err))
		return
	}

	kids, err = cl.Children(ctx, parent)
	if err != nil {
		st.unknown("BrokerError", fmt.Sprintf("list children of %q after attach: %v", parent, err))
		return
	}
	l := findChild(kids, child)
	if l == nil {
		st.unknown("BrokerError", fmt.Sprintf("%q is not listed under %q right after its attach", child, parent))
		return
	}
	switch {
	case fl.Status.State == naradv1.FanoutLinkAttached:
		r.event(fl, "Warning", "Reattached", "Attach",
			"link %s → %s was detached outside the operator; attached it again (epoch %s)", parent, child, l.AttachEpoch)
	case fl.Spec.CreateChild && ct == nil:
		r.event(fl, "Normal", "Attached", "Attach", "created child topic %q attached to %q (epoch %s)", child, parent, l.AttachEpoch)
	default:
		r.event(fl, "Normal", "Attached", "Attach", "attached %q to %q (epoch %s)", child, parent, l.AttachEpoch)
	}
	st.attached(*l)
}

// findChild returns child's entry in the listing, nil when it is not attached to that parent.
func findChild(kids *client.ChildList, child string) *client.ChildLink {
	for i := range kids.Children {
		if kids.Children[i].Name == child {
			return &kids.Children[i]
		}
	}
	return nil
}

// sameLink decides whether a listed link is the one spec asks for. The delay is fixed for
// the life of a link, so a different one is a refusal, never corrected by detaching.
func sameLink(spec naradv1.FanoutLinkSpec, l client.ChildLink) (ok bool, reason, msg string) {
	if l.DelayMs != spec.DelayMs {
		return false, "DelayMismatch", fmt.Sprintf(
			"%q is already attached to %q with delay_ms %d, not the spec's %d; delete the other link first",
			spec.Child, spec.Parent, l.DelayMs, spec.DelayMs)
	}
	return true, "", ""
}

// attachable decides whether an existing, unlisted child may be attached: fan-out is one level
// deep and a child has a single parent (docs/internals/http-api.md §2.12). The brokers decide the rest.
func attachable(child client.Topic) (ok bool, reason, msg string) {
	switch {
	case child.Parent != "":
		return false, "AttachedElsewhere", fmt.Sprintf("%q is already a child of %q", child.Name, child.Parent)
	case child.Role == client.RoleParent:
		return false, "ChildIsParent", fmt.Sprintf("%q is a parent (of %v); fan-out is one level deep", child.Name, child.Children)
	}
	return true, "", ""
}

// childCreateRequest is the one-call child create of docs/internals/http-api.md §2.2.1 (createChild).
func childCreateRequest(spec naradv1.FanoutLinkSpec) client.CreateTopicRequest {
	req := client.CreateTopicRequest{Name: spec.Child, Parent: spec.Parent, FanoutDelayMs: spec.DelayMs}
	if spec.ChildPartitions != nil {
		req.Partitions = int(*spec.ChildPartitions)
	}
	return req
}

// isRejection reports whether the brokers refused the request as it stands (4xx but 429):
// retrying it unchanged cannot succeed.
func isRejection(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 429
}
