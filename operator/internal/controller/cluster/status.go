package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// Condition reasons set by this file (Draining and Degraded belong to the scale code).
const (
	ReasonClusterReady       = "ClusterReady"
	ReasonPodsNotReady       = "PodsNotReady"
	ReasonBrokersUnreachable = "BrokersUnreachable"
	ReasonNoLeader           = "NoLeader"

	ReasonCreating      = "Creating"
	ReasonScalingUp     = "ScalingUp"
	ReasonScalingDown   = "ScalingDown"
	ReasonRollingUpdate = "RollingUpdate"
	ReasonPodsStarting  = "PodsStarting"
	ReasonSettled       = "Settled"

	ReasonMovesInFlight = "MovesInFlight"
	ReasonNoMoves       = "NoMoves"
)

// findCondition returns the condition of type t, or nil.
func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}

// setCondition sets a True/False condition with nc's generation; the transition time only
// moves when the status flips.
func (r *Reconciler) setCondition(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	r.setConditionStatus(nc, st, t, s, reason, msg)
}

func (r *Reconciler) setConditionStatus(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(r.now()),
	})
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// patchStatus writes st as nc's status when it differs from what nc carries.
func (r *Reconciler) patchStatus(ctx context.Context, nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus) error {
	if equality.Semantic.DeepEqual(&nc.Status, st) {
		return nil
	}
	patch := ctrlclient.MergeFrom(nc.DeepCopy())
	nc.Status = *st
	if err := r.Client.Status().Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("write status: %w", ctrlclient.IgnoreNotFound(err))
	}
	return nil
}

// view is everything one reconcile learnt, from which the status is written.
type view struct {
	blocker  *blocker
	note     string // appended to the Ready message (an add-on that could not be created)
	created  bool   // the StatefulSet did not exist before this reconcile
	replicas int32  // the StatefulSet's replica count as applied (or found, when blocked)
	pods     []corev1.Pod
	obs      *observation
	roll     rollPlan

	// Replication safety (disruption.go, rolling_replicas.go, volumeloss.go).
	health     replicaHealth
	disruption disruptionPlan
	volumeLoss bool // a lost volume is open
	resizing   bool // a claim is growing to spec.storage.size (storage.go)
}

// readyPods counts the pods that are Ready and not being deleted.
func readyPods(pods []corev1.Pod) int32 {
	var n int32
	for i := range pods {
		if podReady(&pods[i]) {
			n++
		}
	}
	return n
}

// fillStatus writes everything but Draining, Degraded, st.Draining and st.ScalePreview (the
// scale code's) from v, and records events on the transitions worth one.
func (r *Reconciler) fillStatus(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, v *view) {
	prevReady := findCondition(nc.Status.Conditions, naradv1.ConditionReady)
	st.ObservedGeneration = nc.Generation
	st.Selector = labels.SelectorFromSet(naming.Selector(nc)).String()
	st.Replicas = v.replicas
	st.ReadyReplicas = readyPods(v.pods)
	st.Version = runningVersion(v.pods, nc.Status.Version)
	obs := v.obs
	st.Leader = obs.leader()
	if obs.Err == nil {
		st.Members = memberStatuses(nc, obs.Members, v.pods)
		if obs.MovesErr == nil {
			st.Moves = movesStatus(obs.Moves)
		}
	}

	ready, reason, msg := readiness(nc, st, v)
	if v.note != "" {
		msg += "; " + v.note
		if prevReady == nil || !strings.Contains(prevReady.Message, v.note) {
			r.event(nc, corev1.EventTypeWarning, "AddonUnavailable", "Reconcile", "%s", v.note)
		}
	}
	r.setCondition(nc, st, naradv1.ConditionReady, ready, reason, msg)
	if prevReady == nil || prevReady.Reason != reason {
		switch reason {
		case ReasonSecretMissing, ReasonCertManagerMissing, ReasonBrokersUnreachable:
			r.event(nc, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
		case ReasonClusterReady:
			r.event(nc, corev1.EventTypeNormal, reason, "Reconcile", "%s", msg)
		}
	}

	progressing, preason, pmsg := progress(nc, st, v)
	r.setCondition(nc, st, naradv1.ConditionProgressing, progressing, preason, pmsg)

	switch {
	case obs.Err != nil || obs.MovesErr != nil:
		r.setConditionStatus(nc, st, naradv1.ConditionRebalancing, metav1.ConditionUnknown, ReasonBrokersUnreachable,
			"the brokers' moves could not be read")
	case len(obs.Moves) > 0:
		r.setCondition(nc, st, naradv1.ConditionRebalancing, true, ReasonMovesInFlight,
			fmt.Sprintf("%d partition moves in flight, %d blocked", len(obs.Moves), len(st.Moves.Blocked)))
	default:
		r.setCondition(nc, st, naradv1.ConditionRebalancing, false, ReasonNoMoves, "no partition move in flight")
	}
	r.fillReplication(nc, st, obs)
}

// readiness is the Ready condition: every wanted broker ready and a Raft leader known.
func readiness(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, v *view) (bool, string, string) {
	switch {
	case v.blocker != nil:
		return false, v.blocker.Reason, v.blocker.Message
	case st.ReadyReplicas == 0:
		return false, ReasonPodsNotReady, fmt.Sprintf("0 of %d pods ready", nc.Spec.Replicas)
	case v.obs.Err != nil:
		return false, ReasonBrokersUnreachable, v.obs.Err.Error()
	case st.Leader == "":
		return false, ReasonNoLeader, "the brokers report no Raft leader"
	case st.ReadyReplicas < nc.Spec.Replicas:
		return false, ReasonPodsNotReady, fmt.Sprintf("%d of %d pods ready", st.ReadyReplicas, nc.Spec.Replicas)
	}
	return true, ReasonClusterReady, fmt.Sprintf("%d brokers ready, Raft leader %s", st.ReadyReplicas, st.Leader)
}

// progress is the Progressing condition: the operator is still moving the cluster towards
// its spec.
func progress(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, v *view) (bool, string, string) {
	switch {
	case v.blocker != nil:
		return false, v.blocker.Reason, "waiting: " + v.blocker.Message
	case v.created:
		return true, ReasonCreating, fmt.Sprintf("created the StatefulSet with %d replicas", v.replicas)
	case v.replicas < nc.Spec.Replicas:
		return true, ReasonScalingUp, fmt.Sprintf("scaling from %d to %d replicas", v.replicas, nc.Spec.Replicas)
	case v.replicas > nc.Spec.Replicas:
		return true, ReasonScalingDown, fmt.Sprintf("scaling from %d to %d replicas", v.replicas, nc.Spec.Replicas)
	case v.roll.Outdated > 0:
		msg := fmt.Sprintf("%d pods to restart onto the new revision", v.roll.Outdated)
		if v.roll.Wait != "" {
			msg += "; waiting: " + v.roll.Wait
		}
		return true, ReasonRollingUpdate, msg
	case st.ReadyReplicas < v.replicas:
		return true, ReasonPodsStarting, fmt.Sprintf("%d of %d pods ready", st.ReadyReplicas, v.replicas)
	}
	return false, ReasonSettled, fmt.Sprintf("%d replicas up to date", v.replicas)
}

// memberStatuses maps the brokers' members to status entries sorted by node ID; Pod is set
// when the member is one of nc's ordinals and its pod exists.
func memberStatuses(nc *naradv1.NaradCluster, members []client.Member, pods []corev1.Pod) []naradv1.MemberStatus {
	exists := map[string]bool{}
	for i := range pods {
		exists[pods[i].Name] = true
	}
	out := make([]naradv1.MemberStatus, 0, len(members))
	for _, m := range members {
		if m.RaftRole == "none" && m.OwnedPartitions == 0 && !exists[m.ID] {
			// Decommissioned and its pod gone: the brokers keep the record for a while, but it
			// is no longer part of the cluster.
			continue
		}
		ms := naradv1.MemberStatus{NodeID: m.ID, RaftRole: m.RaftRole, Status: m.Status,
			OwnedPartitions: int32(m.OwnedPartitions), Draining: m.Draining}
		if _, ok := naming.Ordinal(nc, m.ID); ok && exists[m.ID] {
			ms.Pod = m.ID
		}
		out = append(out, ms)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	if len(out) == 0 {
		return nil
	}
	return out
}

// movesStatus summarises the brokers' moves: how many are in flight, and which are blocked
// with the brokers' reasons.
func movesStatus(moves []client.Move) naradv1.MovesStatus {
	ms := naradv1.MovesStatus{InFlight: int32(len(moves))}
	for _, m := range moves {
		if len(m.Blocked) == 0 {
			continue
		}
		ms.Blocked = append(ms.Blocked, naradv1.BlockedMove{Topic: m.Topic, Partition: int32(m.Partition),
			From: m.From, To: m.To, Reasons: append([]string(nil), m.Blocked...)})
	}
	return ms
}
