package fanoutlink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	ctrl "sigs.k8s.io/controller-runtime"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// Remote links (spec.remote, docs/internals/fanout.md §13): the child is a topic of another Narad
// cluster. The brokers check the target at attach (it answers, the credentials work, the topic
// exists and is not a delay child) and refuse with 422 and a reason, leaving no link; the
// operator shows that reason as the Degraded reason. A listed link whose id is the target's
// (remote:<topic>@<host:port of the first URL>) is adopted; the credentials it was attached
// with stay the brokers' business until the link is deleted and attached again.

// linkRemote makes the brokers hold fl's remote link and records its state in st. Only
// Kubernetes read failures are returned.
func (r *Reconciler) linkRemote(ctx context.Context, fl *naradv1.FanoutLink, cl *client.Client, st *status) error {
	parent := fl.Spec.Parent
	t, f, err := r.resolveTarget(ctx, fl)
	if err != nil {
		return err
	}
	if f != nil {
		f.record(st)
		return nil
	}
	id, err := t.id()
	if err != nil {
		st.failed("TargetInvalid", err.Error())
		return nil
	}
	kids, err := cl.Children(ctx, parent)
	if client.IsStatus(err, 404) {
		st.pending("ParentNotFound", fmt.Sprintf("parent topic %q does not exist on the brokers", parent))
		return nil
	}
	if err != nil {
		st.unknown("BrokerError", fmt.Sprintf("list children of %q: %v", parent, err))
		return nil
	}
	if l := findRemote(kids, id); l != nil {
		if ok, reason, msg := sameRemoteLink(fl.Spec, *l); !ok {
			st.failed(reason, msg)
			return nil
		}
		if fl.Status.LinkID != l.ID || fl.Status.Epoch != linkEpoch(*l) {
			r.event(fl, "Normal", "Adopted", "Attach", "adopted the existing remote link %s → %s (epoch %s)", parent, id, linkEpoch(*l))
		}
		st.attachedRemote(*l, t.urls)
		return nil
	}

	_, err = cl.AttachRemote(ctx, parent, client.RemoteChild{URL: t.urls, Topic: t.topic, User: t.user, Password: t.password},
		fl.Spec.DelayMs, string(fl.Spec.Remote.Start))
	switch reason, isTarget := targetReason(err); {
	case err == nil:
	case client.IsStatus(err, 404):
		st.pending("ParentNotFound", fmt.Sprintf("attach %s → %s: %v", parent, id, err))
		return nil
	case isTarget:
		r.event(fl, "Warning", "AttachFailed", "Attach", "the brokers refused the remote target of %s → %s: %v", parent, id, err)
		st.failed(reason, fmt.Sprintf("the brokers refused the remote target %s: %v", id, err))
		return nil
	case isRejection(err):
		r.event(fl, "Warning", "AttachFailed", "Attach", "the brokers refused to attach %s → %s: %v", parent, id, err)
		st.failed("AttachRejected", fmt.Sprintf("the brokers refused to attach %s to %q: %v", id, parent, err))
		return nil
	default:
		st.unknown("BrokerError", fmt.Sprintf("attach %s → %s: %v", parent, id, err))
		return nil
	}

	kids, err = cl.Children(ctx, parent)
	if err != nil {
		st.unknown("BrokerError", fmt.Sprintf("list children of %q after attach: %v", parent, err))
		return nil
	}
	l := findRemote(kids, id)
	if l == nil {
		st.unknown("BrokerError", fmt.Sprintf("%s is not listed under %q right after its attach", id, parent))
		return nil
	}
	if fl.Status.State == naradv1.FanoutLinkAttached {
		r.event(fl, "Warning", "Reattached", "Attach",
			"remote link %s → %s was detached outside the operator; attached it again (epoch %s)", parent, id, linkEpoch(*l))
	} else {
		r.event(fl, "Normal", "Attached", "Attach", "attached remote child %s to %q (epoch %s)", id, parent, linkEpoch(*l))
	}
	st.attachedRemote(*l, t.urls)
	return nil
}

// detachRemote detaches the remote link of a FanoutLink being deleted and releases it. The
// link is named by the id the status recorded, else by the id of the target as it resolves
// now; when neither is known nothing was attached by this object.
func (r *Reconciler) detachRemote(ctx context.Context, fl *naradv1.FanoutLink, cl *client.Client) (ctrl.Result, error) {
	id := fl.Status.LinkID
	if id == "" {
		t, f, err := r.resolveTarget(ctx, fl)
		if err != nil {
			return ctrl.Result{}, err
		}
		if f == nil {
			id, _ = t.id()
		}
	}
	if id == "" {
		return ctrl.Result{}, r.release(ctx, fl)
	}
	return r.detach(ctx, fl, cl, id, func(kids *client.ChildList) *client.ChildLink { return findRemote(kids, id) },
		"remote child "+id)
}

// findRemote returns the remote link id in the listing, nil when parent has none.
func findRemote(kids *client.ChildList, id string) *client.ChildLink {
	for i := range kids.Children {
		if k := &kids.Children[i]; k.ID == id && isRemote(*k) {
			return k
		}
	}
	return nil
}

func isRemote(l client.ChildLink) bool { return l.Kind == "remote" || l.Link == "remote" }

// linkEpoch is a listed link's attach epoch (remote entries carry it twice).
func linkEpoch(l client.ChildLink) string {
	if l.AttachEpoch != "" {
		return l.AttachEpoch
	}
	return l.Epoch
}

// sameRemoteLink decides whether a listed remote link to the spec's target is the one spec
// asks for: the delay is fixed for the life of a link, so another one is a refusal. The start
// mode only placed the link's first positions and is not compared.
func sameRemoteLink(spec naradv1.FanoutLinkSpec, l client.ChildLink) (ok bool, reason, msg string) {
	if l.DelayMs != spec.DelayMs {
		return false, "DelayMismatch", fmt.Sprintf(
			"remote link %s of %q already exists with delay_ms %d, not the spec's %d; delete the other link first",
			l.ID, spec.Parent, l.DelayMs, spec.DelayMs)
	}
	return true, "", ""
}

var reasonCode = regexp.MustCompile(`^[a-z][a-z_]*[a-z]$`)

// targetReason returns the reason code of a failed remote target check: the "reason" of a 422
// answer (target_unreachable, unauthorized, target_topic_missing or target_is_delay_child).
func targetReason(err error) (string, bool) {
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 422 || !reasonCode.MatchString(e.Reason) {
		return "", false
	}
	return e.Reason, true
}

// recoveryPoint decodes a listing's recovery_point (parent partition → lowest unconfirmed
// offset); nil when absent or not that shape.
func recoveryPoint(raw json.RawMessage) map[string]int64 {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]int64
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
		return nil
	}
	return m
}

// remoteTrouble reports whether a remote link's broker state means records are not flowing:
// anything but active, or incomplete (a partition did not report, which is not the link's
// fault).
func remoteTrouble(state string) bool {
	return state != "" && state != "active" && state != "incomplete"
}
