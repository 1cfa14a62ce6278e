// Package clusterref is what the Topic and FanoutLink controllers share about the NaradCluster
// an object names: finding it, reaching one of its brokers, the retry pacing while it cannot be
// reached, and which cluster events concern the objects that reference it.
package clusterref

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
)

// Retry bounds of an object waiting on its cluster or brokers: the wait equals the time the
// Ready condition has been False, clamped to [MinRetry, MaxRetry], so it doubles per attempt.
const (
	MinRetry = time.Second
	MaxRetry = 5 * time.Minute
)

// Connect finds the NaradCluster ns/name and an admin client for any of its brokers that
// answers. Without a client it returns the condition reason and message saying why.
func Connect(ctx context.Context, c ctrlclient.Reader, conn *brokers.Connector, ns, name string) (*naradv1.NaradCluster, *client.Client, string, string) {
	var nc naradv1.NaradCluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, "ClusterNotFound", fmt.Sprintf("NaradCluster %q not found", name)
		}
		return nil, nil, "ClusterUnreadable", fmt.Sprintf("read NaradCluster %q: %v", name, err)
	}
	cl, _, err := conn.Any(ctx, &nc, Ordinals(&nc))
	switch {
	case err == nil:
		return &nc, cl, "", ""
	case errors.Is(err, brokers.ErrNoBroker):
		return &nc, nil, "BrokersUnreachable", fmt.Sprintf("no broker of NaradCluster %q answered: %v", name, err)
	default:
		return &nc, nil, "BrokerCredentials", fmt.Sprintf("NaradCluster %q: %v", name, err)
	}
}

// Ordinals lists the ordinals of nc that may run a broker: status.replicas when the cluster
// controller has reported it, else spec.replicas.
func Ordinals(nc *naradv1.NaradCluster) []int32 {
	n := nc.Status.Replicas
	if n == 0 {
		n = nc.Spec.Replicas
	}
	out := make([]int32, 0, n)
	for i := range n {
		out = append(out, i)
	}
	return out
}

// RetryAfter is the wait before the next attempt of an object whose Ready condition is False:
// as long as it has been False, within [MinRetry, MaxRetry].
func RetryAfter(conds []metav1.Condition, now time.Time) time.Duration {
	c := apimeta.FindStatusCondition(conds, naradv1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse {
		return MinRetry
	}
	return min(max(now.Sub(c.LastTransitionTime.Time), MinRetry), MaxRetry)
}

// AvailabilityChanged passes NaradCluster events that can change what referencing objects see:
// creation, deletion, and a flip of its Ready condition or replica count.
func AvailabilityChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*naradv1.NaradCluster)
			n, ok2 := e.ObjectNew.(*naradv1.NaradCluster)
			if !ok1 || !ok2 {
				return false
			}
			return apimeta.IsStatusConditionTrue(o.Status.Conditions, naradv1.ConditionReady) !=
				apimeta.IsStatusConditionTrue(n.Status.Conditions, naradv1.ConditionReady) ||
				o.Status.Replicas != n.Status.Replicas || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// Cleanup is what a deletion needs to know about the cluster an object references.
type Cleanup struct {
	// Client reaches a broker of the cluster; nil when none answers (or the cluster is gone).
	Client *client.Client
	// Gone is set when nothing is left to clean up on the brokers: the NaradCluster does not
	// exist, or it is being deleted and no broker answers. Why says which, for the event.
	Gone bool
	Why  string
}

// ForCleanup reads the NaradCluster ns/name for the deletion of an object that references it.
// Without Client and without Gone, the brokers are unreachable for now (Why says why): retry.
func ForCleanup(ctx context.Context, c ctrlclient.Reader, conn *brokers.Connector, ns, name string) (Cleanup, error) {
	var nc naradv1.NaradCluster
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &nc)
	if apierrors.IsNotFound(err) {
		return Cleanup{Gone: true, Why: fmt.Sprintf("NaradCluster %q is gone", name)}, nil
	}
	if err != nil {
		return Cleanup{}, fmt.Errorf("read NaradCluster: %w", err)
	}
	_, cl, _, msg := Connect(ctx, c, conn, ns, name)
	switch {
	case cl != nil:
		return Cleanup{Client: cl}, nil
	case !nc.DeletionTimestamp.IsZero():
		return Cleanup{Gone: true, Why: fmt.Sprintf("NaradCluster %q is being deleted and no broker answers", name)}, nil
	default:
		return Cleanup{Why: msg}, nil
	}
}

// AddFinalizer puts finalizer on obj (a patch) unless it is there already.
func AddFinalizer(ctx context.Context, c ctrlclient.Client, obj ctrlclient.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	patch := ctrlclient.MergeFrom(obj.DeepCopyObject().(ctrlclient.Object))
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// Release removes finalizer from obj (a patch); an object already gone is fine.
func Release(ctx context.Context, c ctrlclient.Client, obj ctrlclient.Object, finalizer string) error {
	patch := ctrlclient.MergeFrom(obj.DeepCopyObject().(ctrlclient.Object))
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// DeleteRetry backs off a failing cleanup by the time the deletion has been pending, within
// [MinRetry, MaxRetry].
func DeleteRetry(obj ctrlclient.Object) time.Duration {
	return min(max(time.Since(obj.GetDeletionTimestamp().Time), MinRetry), MaxRetry)
}

// RequeueOnConflict turns a conflict (the object changed under the pass) into a quick
// requeue instead of an error: the next pass reads the new version.
func RequeueOnConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return res, err
}

// Finish ends a pass over obj: it writes obj's status when the pass changed it, then requeues
// after the backoff of a wait for the cluster (RetryAfter on conds) or, otherwise, after
// resync (drift correction and status refresh).
func Finish(ctx context.Context, c ctrlclient.Client, obj ctrlclient.Object, changed, waiting bool,
	conds []metav1.Condition, resync time.Duration) (ctrl.Result, error) {
	if changed {
		if err := c.Status().Update(ctx, obj); err != nil {
			return RequeueOnConflict(ctrl.Result{}, fmt.Errorf("write status: %w", err))
		}
	}
	if waiting {
		return ctrl.Result{RequeueAfter: RetryAfter(conds, time.Now())}, nil
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}
