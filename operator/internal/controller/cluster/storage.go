package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Reasons of the VolumesResizing condition.
const (
	ReasonExpanding           = "Expanding"
	ReasonExpansionNotAllowed = "ExpansionNotAllowed"
	ReasonVolumesAtSize       = "VolumesAtSize"
)

// Growing the volumes (docs/kubernetes.md "Growing the volumes"). A StatefulSet's
// volumeClaimTemplates cannot change, so the template keeps the size the cluster was created
// with and the operator patches each broker's claim instead: spec.resources.requests.storage
// of every claim of an ordinal below the replica count, new claims included (a scale-up makes
// them from the template, the next pass grows them). The CSI driver and the kubelet then grow
// the volume and its file system while the pod runs. It only asks where every such claim's
// StorageClass has allowVolumeExpansion; otherwise nothing is patched and the VolumesResizing
// condition says which class refuses. spec.storage.size never shrinks (a CEL rule refuses it).

// desiredSize is spec.storage.size, or the default.
func desiredSize(nc *naradv1.NaradCluster) resource.Quantity {
	if nc.Spec.Storage.Size != nil {
		return *nc.Spec.Storage.Size
	}
	return resource.MustParse(defaultStorageSize)
}

// reconcileStorage grows the claims of ordinals below replicas to spec.storage.size where their
// StorageClasses allow it, writes st.Storage and the VolumesResizing condition, and reports
// whether a claim is still resizing (the caller requeues sooner).
func (r *Reconciler) reconcileStorage(ctx context.Context, nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus,
	sts *appsv1.StatefulSet, replicas int32) (bool, error) {
	want := desiredSize(nc)
	tmpl := claimTemplate(nc, sts).Spec.Resources.Requests[corev1.ResourceStorage]
	claims, err := r.dataClaims(ctx, nc, replicas)
	if err != nil {
		return false, err
	}
	var small []*corev1.PersistentVolumeClaim
	for _, c := range claims {
		// Kubernetes refuses a new request on a claim that is not bound yet; it is grown once it is.
		if req := c.Spec.Resources.Requests[corev1.ResourceStorage]; req.Cmp(want) < 0 && c.Status.Phase == corev1.ClaimBound {
			small = append(small, c)
		}
	}
	status := &naradv1.StorageStatus{TemplateSize: tmpl.String()}
	if len(small) > 0 {
		if ok, why, err := r.expandable(ctx, small); err != nil {
			return false, err
		} else if !ok {
			least := smallestRequest(claims, tmpl)
			status.Size = least.String()
			st.Storage = status
			msg := fmt.Sprintf("spec.storage.size is %s but %s: the claims keep %s", want.String(), why, status.Size)
			if prev := findCondition(nc.Status.Conditions, naradv1.ConditionVolumesResizing); prev == nil || prev.Reason != ReasonExpansionNotAllowed {
				r.event(nc, corev1.EventTypeWarning, ReasonExpansionNotAllowed, "ExpandVolumes", "%s", msg)
			}
			r.setCondition(nc, st, naradv1.ConditionVolumesResizing, false, ReasonExpansionNotAllowed, msg)
			return false, nil
		}
		for _, c := range small {
			if err := r.expandClaim(ctx, c, want); err != nil {
				return false, err
			}
		}
		r.event(nc, corev1.EventTypeNormal, "ExpandingVolumes", "ExpandVolumes", "asked for %s on claims %s",
			want.String(), claimNames(small))
	}
	least := smallestRequest(claims, tmpl)
	status.Size = least.String()
	for _, c := range claims {
		if resizing(c, want) {
			status.Resizing = append(status.Resizing, c.Name)
		}
	}
	st.Storage = status
	if len(status.Resizing) > 0 {
		r.setCondition(nc, st, naradv1.ConditionVolumesResizing, true, ReasonExpanding,
			fmt.Sprintf("%d claims growing to %s: %s", len(status.Resizing), want.String(), strings.Join(status.Resizing, ", ")))
		return true, nil
	}
	r.setCondition(nc, st, naradv1.ConditionVolumesResizing, false, ReasonVolumesAtSize,
		fmt.Sprintf("%d claims request %s", len(claims), status.Size))
	return false, nil
}

// dataClaims reads the data claims of ordinals below replicas; a claim not created yet (the
// StatefulSet controller makes it with the pod) is skipped.
func (r *Reconciler) dataClaims(ctx context.Context, nc *naradv1.NaradCluster, replicas int32) ([]*corev1.PersistentVolumeClaim, error) {
	var out []*corev1.PersistentVolumeClaim
	for o := range replicas {
		c := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: naming.PVC(nc, o)}, c)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get claim %s: %w", naming.PVC(nc, o), err)
		case c.DeletionTimestamp != nil:
			continue // a lost volume being recreated (volumeloss.go)
		}
		out = append(out, c)
	}
	return out, nil
}

// expandable says whether the StorageClass of every claim allows volume expansion, and if
// not, which refuses and why.
func (r *Reconciler) expandable(ctx context.Context, claims []*corev1.PersistentVolumeClaim) (bool, string, error) {
	checked := map[string]bool{}
	for _, c := range claims {
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName == "" {
			return false, fmt.Sprintf("claim %s has no StorageClass, so it cannot be expanded", c.Name), nil
		}
		name := *c.Spec.StorageClassName
		if checked[name] {
			continue
		}
		var sc storagev1.StorageClass
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &sc); {
		case apierrors.IsNotFound(err):
			return false, fmt.Sprintf("StorageClass %s of claim %s does not exist", name, c.Name), nil
		case err != nil:
			return false, "", fmt.Errorf("get StorageClass %s: %w", name, err)
		case sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion:
			return false, fmt.Sprintf("StorageClass %s does not allow volume expansion (allowVolumeExpansion)", name), nil
		}
		checked[name] = true
	}
	return true, "", nil
}

// expandClaim raises c's storage request to size.
func (r *Reconciler) expandClaim(ctx context.Context, c *corev1.PersistentVolumeClaim, size resource.Quantity) error {
	patch := ctrlclient.MergeFrom(c.DeepCopy())
	if c.Spec.Resources.Requests == nil {
		c.Spec.Resources.Requests = corev1.ResourceList{}
	}
	c.Spec.Resources.Requests[corev1.ResourceStorage] = size
	if err := r.Client.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("expand claim %s to %s: %w", c.Name, size.String(), err)
	}
	return nil
}

// resizing says whether c's volume has not reached want yet: its reported capacity is smaller,
// or Kubernetes reports a resize in progress. A claim without a reported capacity (not bound
// yet) is not resizing.
func resizing(c *corev1.PersistentVolumeClaim, want resource.Quantity) bool {
	for _, cond := range c.Status.Conditions {
		if (cond.Type == corev1.PersistentVolumeClaimResizing || cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending) &&
			cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	capacity, ok := c.Status.Capacity[corev1.ResourceStorage]
	return ok && capacity.Cmp(want) < 0
}

// smallestRequest is the smallest storage request among claims (def when there are none).
func smallestRequest(claims []*corev1.PersistentVolumeClaim, def resource.Quantity) resource.Quantity {
	if len(claims) == 0 {
		return def
	}
	least := claims[0].Spec.Resources.Requests[corev1.ResourceStorage]
	for _, c := range claims[1:] {
		if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(least) < 0 {
			least = q
		}
	}
	return least
}

func claimNames(claims []*corev1.PersistentVolumeClaim) string {
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
