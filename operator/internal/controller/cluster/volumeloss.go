package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Reasons of the VolumeLost condition.
const (
	ReasonVolumeLostWaiting = "WaitingForAdministrator"
	ReasonVolumeRecreating  = "RecreatingVolume"
	ReasonNoVolumeLost      = "NoVolumeLost"
)

// hostnameLabel pins a local PersistentVolume to its node.
const hostnameLabel = "kubernetes.io/hostname"

// findLostVolume says whether the data volume of pod (ordinal o of nc) is lost, and why
// (docs/kubernetes.md "Volume loss"). Only a pod that exists, mounts its claim, is not being
// deleted and is not Ready is looked at: a broker that runs still has its data, whatever happened to its claim.
// The volume is lost when its claim is gone or being deleted, the claim's phase is Lost, the
// PersistentVolume it is bound to is gone, Released, Failed or bound to another claim, or the
// volume is pinned to one node (a local volume) that no longer exists.
func (r *Reconciler) findLostVolume(ctx context.Context, nc *naradv1.NaradCluster, pod *corev1.Pod, o int32) (*naradv1.LostVolume, error) {
	name := naming.PVC(nc, o)
	if pod.DeletionTimestamp != nil || podReady(pod) || !mountsClaim(pod, name) {
		return nil, nil
	}
	lost := func(reason, format string, args ...any) (*naradv1.LostVolume, error) {
		return &naradv1.LostVolume{Pod: pod.Name, Claim: name, Reason: reason, Message: fmt.Sprintf(format, args...)}, nil
	}
	var pvc corev1.PersistentVolumeClaim
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: name}, &pvc); {
	case apierrors.IsNotFound(err):
		return lost(naradv1.VolumeLossClaimDeleted, "claim %s does not exist", name)
	case err != nil:
		return nil, fmt.Errorf("get claim %s: %w", name, err)
	case pvc.DeletionTimestamp != nil:
		return lost(naradv1.VolumeLossClaimDeleted, "claim %s is being deleted", name)
	case pvc.Status.Phase == corev1.ClaimLost:
		return lost(naradv1.VolumeLossClaimLost, "claim %s is Lost: its volume %s was deleted", name, pvc.Spec.VolumeName)
	case pvc.Spec.VolumeName == "":
		return nil, nil // not bound yet: a new claim waiting for its volume
	}
	var pv corev1.PersistentVolume
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, &pv); {
	case apierrors.IsNotFound(err):
		return lost(naradv1.VolumeLossVolumeGone, "volume %s of claim %s does not exist", pvc.Spec.VolumeName, name)
	case err != nil:
		return nil, fmt.Errorf("get volume %s: %w", pvc.Spec.VolumeName, err)
	case pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed:
		return lost(naradv1.VolumeLossVolumeReleased, "volume %s of claim %s is %s", pv.Name, name, pv.Status.Phase)
	case pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "" && pv.Spec.ClaimRef.UID != pvc.UID:
		return lost(naradv1.VolumeLossVolumeReleased, "volume %s is bound to another claim than %s", pv.Name, name)
	}
	host := pinnedHost(&pv)
	if host == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, ctrlclient.MatchingLabels{hostnameLabel: host}); err != nil {
		return nil, fmt.Errorf("list nodes %s=%s: %w", hostnameLabel, host, err)
	}
	if len(nodes.Items) == 0 {
		return lost(naradv1.VolumeLossNodeGone, "volume %s of claim %s is on node %s, which no longer exists", pv.Name, name, host)
	}
	return nil, nil
}

// mountsClaim says whether pod has a volume from claim (the StatefulSet controller gives each
// pod its claim from the volumeClaimTemplate).
func mountsClaim(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

// pinnedHost is the one hostname a volume's required node affinity allows (a local volume),
// or "" when it is not pinned to exactly one node.
func pinnedHost(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
		return ""
	}
	e := terms[0].MatchExpressions[0]
	if e.Key != hostnameLabel || e.Operator != corev1.NodeSelectorOpIn || len(e.Values) != 1 {
		return ""
	}
	return e.Values[0]
}

// reconcileVolumeLoss finds the lost volumes of the pods of ordinals below replicas, keeps
// status.volumeLoss (an entry per pod from the loss until the pod is Ready again), acts on
// spec.storage.onVolumeLoss, and sets the VolumeLost condition. It reports whether an entry
// is open (the caller requeues sooner).
func (r *Reconciler) reconcileVolumeLoss(ctx context.Context, nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, pods []corev1.Pod, replicas int32) (bool, error) {
	byPod := map[string]*corev1.Pod{}
	for i := range pods {
		byPod[pods[i].Name] = &pods[i]
	}
	prev := map[string]naradv1.LostVolume{}
	for _, e := range nc.Status.VolumeLoss {
		prev[e.Pod] = e
	}
	recreate := nc.Spec.Storage.OnVolumeLoss == naradv1.VolumeLossRecreate
	var open []naradv1.LostVolume
	for o := range replicas {
		name := naming.PodName(nc, o)
		pod := byPod[name]
		var found *naradv1.LostVolume
		if pod != nil {
			var err error
			if found, err = r.findLostVolume(ctx, nc, pod, o); err != nil {
				return false, err
			}
		}
		entry, had := prev[name]
		switch {
		case found != nil && (!had || entry.Claim != found.Claim):
			entry = *found
			entry.DetectedAt = metav1.NewTime(r.now())
			r.event(nc, corev1.EventTypeWarning, "VolumeLost", "VolumeLoss", "Pod %s lost its data volume: %s (onVolumeLoss %s)",
				name, found.Message, policyName(nc))
		case found != nil:
			entry.Reason, entry.Message = found.Reason, found.Message
		case !had || (pod != nil && podReady(pod)):
			if had {
				r.event(nc, corev1.EventTypeNormal, "VolumeRecovered", "VolumeLoss", "%s", recoveredNote(entry))
			}
			continue
		}
		if found != nil && recreate {
			if err := r.recreateVolume(ctx, nc, pod, found.Claim); err != nil {
				return false, err
			}
			if entry.RecreatedAt == nil {
				entry.RecreatedAt = new(metav1.NewTime(r.now()))
				r.event(nc, corev1.EventTypeWarning, "RecreatingVolume", "VolumeLoss",
					"Deleted claim %s and pod %s: the pod comes back on a fresh volume and the brokers copy its replicated partitions back into it", found.Claim, name)
			}
		}
		open = append(open, entry)
	}
	st.VolumeLoss = open
	r.setVolumeLostCondition(nc, st, recreate)
	return len(open) > 0, nil
}

func policyName(nc *naradv1.NaradCluster) naradv1.VolumeLossPolicy {
	if nc.Spec.Storage.OnVolumeLoss == "" {
		return naradv1.VolumeLossWait
	}
	return nc.Spec.Storage.OnVolumeLoss
}

func recoveredNote(e naradv1.LostVolume) string {
	if e.RecreatedAt != nil {
		return fmt.Sprintf("Pod %s runs again on a fresh volume (claim %s was lost: %s); the brokers copy its replicated partitions back into it", e.Pod, e.Claim, e.Reason)
	}
	return fmt.Sprintf("Pod %s runs again (its volume was reported lost: %s)", e.Pod, e.Reason)
}

// recreateVolume deletes the lost claim (unless it is already going) and the pod, so that the
// StatefulSet controller creates both afresh. The pod's deletion also releases the claim's
// kubernetes.io/pvc-protection finalizer.
func (r *Reconciler) recreateVolume(ctx context.Context, nc *naradv1.NaradCluster, pod *corev1.Pod, claim string) error {
	var pvc corev1.PersistentVolumeClaim
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: claim}, &pvc)
	switch {
	case err == nil && pvc.DeletionTimestamp == nil:
		uid := pvc.UID
		if err := r.Client.Delete(ctx, &pvc, ctrlclient.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete lost claim %s: %w", claim, err)
		}
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get claim %s: %w", claim, err)
	}
	uid := pod.UID
	if err := r.Client.Delete(ctx, pod, ctrlclient.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s of a lost volume: %w", pod.Name, err)
	}
	return nil
}

// setVolumeLostCondition: True while status.volumeLoss has entries.
func (r *Reconciler) setVolumeLostCondition(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus, recreate bool) {
	if len(st.VolumeLoss) == 0 {
		r.setCondition(nc, st, naradv1.ConditionVolumeLost, false, ReasonNoVolumeLost, "every broker pod runs on its volume")
		return
	}
	parts := make([]string, 0, len(st.VolumeLoss))
	for _, e := range st.VolumeLoss {
		parts = append(parts, fmt.Sprintf("%s: %s", e.Pod, e.Message))
	}
	reason, tail := ReasonVolumeLostWaiting,
		"onVolumeLoss is Wait: restore the volume, or delete the claim and the pod to start the broker empty"
	if recreate {
		reason, tail = ReasonVolumeRecreating, "onVolumeLoss is Recreate: the pods come back on fresh volumes and the brokers copy their replicated partitions back"
	}
	r.setCondition(nc, st, naradv1.ConditionVolumeLost, true, reason,
		fmt.Sprintf("%d broker volumes lost (%s); %s", len(st.VolumeLoss), strings.Join(parts, "; "), tail))
}
