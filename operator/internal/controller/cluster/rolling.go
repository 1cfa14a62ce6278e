package cluster

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// rollPlan is the rolling-restart decision of one reconcile.
type rollPlan struct {
	// Outdated counts the pods of the wanted ordinals not on the StatefulSet's update revision.
	Outdated int
	// Victim is the pod to delete now (nil when none may go).
	Victim *corev1.Pod
	// Wait says why no pod may go although some are outdated.
	Wait string
	// First is true when no pod has moved to the update revision yet (the roll starts now).
	First bool
}

// planRoll is the rolling-restart policy, a pure function of what the reconcile observed:
// with updateStrategy OnDelete the operator restarts the brokers itself, one pod at a time,
// only while every pod is Ready and the brokers report a Raft leader; highest ordinal first,
// the leader's pod last. A pod deleted earlier (inflight, by UID) that the cache still shows
// alive counts as terminating, so a stale cache never lets two pods go at once.
func planRoll(nc *naradv1.NaradCluster, sts *appsv1.StatefulSet, pods []corev1.Pod, leader string, inflight types.UID) rollPlan {
	var plan rollPlan
	rev := sts.Status.UpdateRevision
	if rev == "" || sts.Spec.Replicas == nil {
		return plan
	}
	replicas := *sts.Spec.Replicas
	var current []*corev1.Pod
	var outdated []*corev1.Pod
	var terminating, notReady string
	for i := range pods {
		p := &pods[i]
		o, ok := naming.Ordinal(nc, p.Name)
		if !ok || o >= replicas {
			continue
		}
		current = append(current, p)
		switch {
		case p.DeletionTimestamp != nil || (inflight != "" && p.UID == inflight):
			terminating = p.Name
			continue
		case !podReady(p):
			notReady = p.Name
		}
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev {
			outdated = append(outdated, p)
		}
	}
	plan.Outdated = len(outdated)
	if plan.Outdated == 0 {
		return plan
	}
	plan.First = len(outdated) == len(current) && int32(len(current)) == replicas
	switch {
	case sts.Status.ObservedGeneration < sts.Generation:
		plan.Wait = "the StatefulSet controller has not observed the latest template yet"
	case terminating != "":
		plan.Wait = fmt.Sprintf("pod %s is terminating", terminating)
	case int32(len(current)) < replicas:
		plan.Wait = fmt.Sprintf("%d of %d pods exist", len(current), replicas)
	case notReady != "":
		plan.Wait = fmt.Sprintf("pod %s is not ready", notReady)
	case leader == "":
		plan.Wait = "the brokers report no Raft leader"
	}
	if plan.Wait != "" {
		return plan
	}
	sort.Slice(outdated, func(i, j int) bool {
		li, lj := outdated[i].Name == leader, outdated[j].Name == leader
		if li != lj {
			return lj // the leader's pod goes last
		}
		oi, _ := naming.Ordinal(nc, outdated[i].Name)
		oj, _ := naming.Ordinal(nc, outdated[j].Name)
		return oi > oj
	})
	plan.Victim = outdated[0]
	return plan
}

// roll carries out planRoll: it deletes at most one pod (the StatefulSet controller recreates
// it on the update revision) and remembers it until the cache shows it going.
func (r *Reconciler) roll(ctx context.Context, nc *naradv1.NaradCluster, sts *appsv1.StatefulSet, pods []corev1.Pod, leader string, h replicaHealth) (rollPlan, error) {
	inflight := r.inflightRestart(nc, pods)
	plan := waitForReplicas(planRoll(nc, sts, pods, leader, inflight), h)
	if plan.Victim == nil {
		return plan, nil
	}
	p := plan.Victim
	r.restorePreferredLeaders(ctx, nc, h)
	if plan.First {
		r.event(nc, corev1.EventTypeNormal, "RollingRestart", "RollingRestart",
			"Restarting %d pods one at a time onto revision %s, the Raft leader's pod last", plan.Outdated, sts.Status.UpdateRevision)
	}
	uid := p.UID
	if err := r.Client.Delete(ctx, p, ctrlclient.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return plan, fmt.Errorf("restart pod %s: %w", p.Name, err)
	}
	r.restarts.Store(nc.UID, uid)
	r.event(nc, corev1.EventTypeNormal, "PodRestarted", "RollingRestart", "Deleted pod %s (revision %s) to restart it on revision %s",
		p.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey], sts.Status.UpdateRevision)
	return plan, nil
}

// inflightRestart is the UID of the pod this reconciler deleted last for nc while the cache
// still shows it without a deletionTimestamp; it forgets the pod once the cache catches up.
func (r *Reconciler) inflightRestart(nc *naradv1.NaradCluster, pods []corev1.Pod) types.UID {
	v, ok := r.restarts.Load(nc.UID)
	if !ok {
		return ""
	}
	uid := v.(types.UID)
	for i := range pods {
		if pods[i].UID == uid && pods[i].DeletionTimestamp == nil {
			return uid
		}
	}
	r.restarts.Delete(nc.UID)
	return ""
}
