package podrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// pvcProtectionFinalizer is added to every PVC by the API server's admission; the
// kube-controller-manager removes it once no pod uses the claim. The runner does that here.
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// ensureClaim creates claim template t of pod as "<template>-<pod>" when missing (labels from
// the template and the StatefulSet's selector; no owner, so it outlives the pod, like the
// default retention policy) and marks it Bound. ready is false while an old claim of that name
// is being deleted.
func (r *Runner) ensureClaim(ctx context.Context, s *appsv1.StatefulSet, t corev1.PersistentVolumeClaim, pod string) (bool, error) {
	name := t.Name + "-" + pod
	var pvc corev1.PersistentVolumeClaim
	err := r.cl.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &pvc)
	switch {
	case err == nil:
		return pvc.DeletionTimestamp == nil, nil
	case !apierrors.IsNotFound(err):
		return false, err
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	if s.Spec.Selector != nil {
		for k, v := range s.Spec.Selector.MatchLabels {
			labels[k] = v
		}
	}
	pvc = corev1.PersistentVolumeClaim{Spec: *t.Spec.DeepCopy()}
	pvc.Namespace, pvc.Name, pvc.Labels, pvc.Annotations = s.Namespace, name, labels, t.Annotations
	if err := r.cl.Create(ctx, &pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	r.logf("statefulset %s/%s: created PVC %s", s.Namespace, s.Name, name)
	body, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase": corev1.ClaimBound, "accessModes": pvc.Spec.AccessModes, "capacity": pvc.Spec.Resources.Requests,
	}})
	if err != nil {
		return false, err
	}
	return true, ignoreNotFound(r.cl.Status().Patch(ctx, &pvc, ctrlclient.RawPatch(types.MergePatchType, body)))
}

// claimDir returns the data directory of claim ns/name, one per PVC object (by UID): it
// survives pod restarts and re-creations and is removed when the PVC object is deleted.
func (r *Runner) claimDir(ctx context.Context, ns, name string) (string, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := r.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pvc); err != nil {
		return "", fmt.Errorf("claim %s/%s: %w", ns, name, err)
	}
	if pvc.DeletionTimestamp != nil {
		return "", fmt.Errorf("claim %s/%s is being deleted", ns, name)
	}
	dir := filepath.Join(r.root, "pvc", ns, name+"-"+string(pvc.UID)[:8])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	r.mu.Lock()
	r.claims[pvc.UID] = dir
	r.mu.Unlock()
	return dir, nil
}

// ClaimDir returns the data directory of claim ns/name, "" when the runner holds none for it.
func (r *Runner) ClaimDir(ns, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	prefix := filepath.Join(r.root, "pvc", ns, name) + "-"
	for _, d := range r.claims {
		if len(d) == len(prefix)+8 && d[:len(prefix)] == prefix {
			return d
		}
	}
	return ""
}

// syncClaims plays the PVC protection controller (drop the finalizer of a deleted claim no
// pod uses) and removes the data directory of every claim whose object is gone.
func (r *Runner) syncClaims(ctx context.Context, pods *corev1.PodList) error {
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.cl.List(ctx, &pvcs); err != nil {
		return fmt.Errorf("list PVCs: %w", err)
	}
	inUse := map[string]bool{} // "ns/claim" used by a pod object
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				inUse[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	exists := map[types.UID]bool{}
	var errs []error
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		exists[pvc.UID] = true
		if pvc.DeletionTimestamp == nil || inUse[pvc.Namespace+"/"+pvc.Name] {
			continue
		}
		var keep []string
		for _, f := range pvc.Finalizers {
			if f != pvcProtectionFinalizer {
				keep = append(keep, f)
			}
		}
		if len(keep) == len(pvc.Finalizers) {
			continue
		}
		patch := ctrlclient.MergeFromWithOptions(pvc.DeepCopy(), ctrlclient.MergeFromWithOptimisticLock{})
		pvc.Finalizers = keep
		if err := r.cl.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	r.mu.Lock()
	var gone []string
	for uid, dir := range r.claims {
		if !exists[uid] {
			gone = append(gone, dir)
			delete(r.claims, uid)
		}
	}
	r.mu.Unlock()
	for _, dir := range gone {
		r.logf("PVC of %s deleted: removing its data", dir)
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}
