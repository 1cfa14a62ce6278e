// Package pause is the narad.dev/pause-reconcile annotation the three controllers honour: while
// it is "true" on an object, its controller changes nothing for it (no broker call, no owned
// object written, no finalizer cleanup) and only keeps the ReconcilePaused condition True
// (docs/kubernetes.md "Pausing reconciliation").
package pause

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	naradv1 "narad.dev/api/v1alpha1"
)

// Reasons of the ReconcilePaused condition.
const (
	ReasonPaused  = "PauseAnnotation"
	ReasonResumed = "Resumed"
)

// Requested says whether o asks its controller to pause: the annotation's value is exactly
// "true" (anything else, "false" included, reconciles as usual).
func Requested(o metav1.Object) bool {
	return o.GetAnnotations()[naradv1.PauseReconcileAnnotation] == "true"
}

// Mark sets the ReconcilePaused condition in conds from o's annotation: True while paused,
// False once resumed; an object never paused gets no condition. It reports whether o is
// paused, whether the condition's status flipped (worth an event), and whether the condition
// changed at all (a new spec generation seen while paused: worth a status write).
func Mark(conds *[]metav1.Condition, o metav1.Object) (paused, flipped, changed bool) {
	paused = Requested(o)
	prev := meta.FindStatusCondition(*conds, naradv1.ConditionReconcilePaused)
	if !paused && prev == nil {
		return false, false, false
	}
	c := metav1.Condition{Type: naradv1.ConditionReconcilePaused, ObservedGeneration: o.GetGeneration(),
		Status: metav1.ConditionFalse, Reason: ReasonResumed,
		Message: "reconciling: the " + naradv1.PauseReconcileAnnotation + " annotation is not \"true\""}
	if paused {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonPaused
		c.Message = "the " + naradv1.PauseReconcileAnnotation + " annotation is \"true\": the operator changes nothing until it is removed"
	}
	flipped = prev == nil || prev.Status != c.Status
	changed = meta.SetStatusCondition(conds, c)
	return paused, flipped, changed
}

// Changed passes updates that set, change or remove the annotation, for controllers whose
// watch otherwise passes spec changes only.
func Changed() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[naradv1.PauseReconcileAnnotation] !=
			e.ObjectNew.GetAnnotations()[naradv1.PauseReconcileAnnotation]
	}}
}
