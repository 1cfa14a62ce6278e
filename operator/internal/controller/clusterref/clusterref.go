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
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
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
