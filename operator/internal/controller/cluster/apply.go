package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
)

// fieldOwner is the server-side apply manager of everything the cluster controller writes.
const fieldOwner = ctrlclient.FieldOwner("narad-operator")

// apply server-side applies obj (built from the spec, owned by nc) with forced ownership, so a
// hand edit of a field the operator sets is undone on the next reconcile; fields the operator
// never sets are left alone. It records Created or Updated when the object changed.
func (r *Reconciler) apply(ctx context.Context, nc *naradv1.NaradCluster, obj ctrlclient.Object) error {
	if err := controllerutil.SetControllerReference(nc, obj, r.Scheme); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, r.Scheme)
	if err != nil {
		return err
	}
	// The typed read comes from the informer cache; an unstructured one would go to the API.
	before, ok := obj.DeepCopyObject().(ctrlclient.Object)
	if !ok {
		return fmt.Errorf("%s is not a client.Object", gvk.Kind)
	}
	existed, err := r.exists(ctx, ctrlclient.ObjectKeyFromObject(obj), before)
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("convert %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: pruneApplied(content)}
	u.SetGroupVersionKind(gvk)
	return r.applyUnstructured(ctx, nc, u, existed, before)
}

// applyUnstructured applies u (owner reference already set) and records what changed,
// comparing with the object as it was before (when it existed).
func (r *Reconciler) applyUnstructured(ctx context.Context, nc *naradv1.NaradCluster, u *unstructured.Unstructured, existed bool, before metav1.Object) error {
	kind := u.GetKind()
	if err := r.Client.Apply(ctx, ctrlclient.ApplyConfigurationFromUnstructured(u), fieldOwner, ctrlclient.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, u.GetName(), err)
	}
	switch {
	case !existed:
		r.event(nc, corev1.EventTypeNormal, "Created", "Create", "Created %s %s", kind, u.GetName())
	case changed(before, u):
		r.event(nc, corev1.EventTypeNormal, "Updated", "Update", "Updated %s %s", kind, u.GetName())
	}
	return nil
}

// changed tells whether an apply changed the object. Kinds with a generation (StatefulSet,
// PDB, custom resources) bump it on spec changes only, so a status write that the cached copy
// has not seen yet is not mistaken for the operator's change; other kinds compare versions.
func changed(before, after metav1.Object) bool {
	if before.GetGeneration() != 0 {
		return before.GetGeneration() != after.GetGeneration()
	}
	return before.GetResourceVersion() != after.GetResourceVersion()
}

// exists reads key into obj; false without error when it is not found.
func (r *Reconciler) exists(ctx context.Context, key ctrlclient.ObjectKey, obj ctrlclient.Object) (bool, error) {
	if err := r.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	return true, nil
}

// pruneApplied drops what a typed object carries but an apply must not claim: the status,
// and null values (creationTimestamp of the object and of its nested templates).
func pruneApplied(m map[string]any) map[string]any {
	delete(m, "status")
	pruneNulls(m)
	if spec, ok := m["spec"].(map[string]any); ok {
		if vcts, ok := spec["volumeClaimTemplates"].([]any); ok {
			for _, v := range vcts {
				if vm, ok := v.(map[string]any); ok {
					delete(vm, "status")
				}
			}
		}
	}
	return m
}

func pruneNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			pruneNulls(e)
		}
	case []any:
		for _, e := range x {
			pruneNulls(e)
		}
	}
}

// event records an event about nc (UpperCamelCase reason).
func (r *Reconciler) event(nc *naradv1.NaradCluster, eventType, reason, action, note string, args ...any) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(nc, nil, eventType, reason, action, note, args...)
}
