package cluster

import (
	corev1 "k8s.io/api/core/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
	"narad.dev/operator/release"
)

// versionBlocker refuses a broker image whose tag is a release outside the skew policy
// (docs/kubernetes.md "Versions and upgrades"): the StatefulSet is not written, so the pods keep
// the image they run, and the Ready condition says why. An image tag that is not a release
// version (dev, a commit) is not checked.
func (r *Reconciler) versionBlocker(nc *naradv1.NaradCluster) *blocker {
	ok, reason, msg := release.CheckBroker(r.operatorVersion(), release.ImageTag(r.image(nc)))
	if ok {
		return nil
	}
	if prev := findCondition(nc.Status.Conditions, naradv1.ConditionReady); prev == nil || prev.Reason != reason {
		r.event(nc, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	}
	return &blocker{Reason: reason, Message: msg}
}

func (r *Reconciler) operatorVersion() string {
	if r.OperatorVersion != "" {
		return r.OperatorVersion
	}
	return release.Version
}

// runningVersion is the tag of the broker image every pod of pods runs (status.version).
// While they differ (a rolling update), or no pod exists, it is prev: the version the whole
// cluster last ran.
func runningVersion(pods []corev1.Pod, prev string) string {
	tag, seen := "", false
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		for _, c := range pods[i].Spec.Containers {
			if c.Name != naming.ContainerName {
				continue
			}
			t := release.ImageTag(c.Image)
			if seen && t != tag {
				return prev
			}
			tag, seen = t, true
		}
	}
	if !seen {
		return prev
	}
	return tag
}
