// Package topic reconciles Topic objects with broker topics through the admin API.
//
// A Topic is level-reconciled: every pass describes the broker topic and corrects what differs
// from the spec (drift), then requeues after ResyncPeriod. Broker trouble never becomes a
// reconcile error (which would log and retry at controller-runtime's pace); it becomes a
// condition and a requeue whose delay grows with the condition's age (see retryAfter).
package topic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/controller/clusterref"
	"narad.dev/operator/internal/controller/pause"
)

// Reconciler reconciles one Topic at a time.
type Reconciler struct {
	Client   ctrlclient.Client
	Scheme   *runtime.Scheme
	Brokers  *brokers.Connector
	Recorder events.EventRecorder
	// ResyncPeriod is how often a reconciled Topic is compared with the broker again (drift).
	ResyncPeriod time.Duration
}

// clusterRefIndex indexes Topics by spec.clusterRef.name, so a NaradCluster's arrival or
// departure wakes its Topics at once instead of at their next backoff.
const clusterRefIndex = "topic-controller:spec.clusterRef.name"

// SetupWithManager registers the controller: Topics (spec changes, creation, deletion) and
// the NaradClusters they reference (created, deleted, or its Ready condition flipped).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &naradv1.Topic{}, clusterRefIndex,
		func(o ctrlclient.Object) []string { return []string{o.(*naradv1.Topic).Spec.ClusterRef.Name} })
	if err != nil {
		return fmt.Errorf("index topics by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("topic").
		For(&naradv1.Topic{}, builder.WithPredicates(predicate.Or[ctrlclient.Object](predicate.GenerationChangedPredicate{}, pause.Changed()))).
		Watches(&naradv1.NaradCluster{}, handler.EnqueueRequestsFromMapFunc(r.topicsOfCluster),
			builder.WithPredicates(clusterref.AvailabilityChanged())).
		Complete(r)
}

// topicsOfCluster maps a NaradCluster to the Topics that reference it.
func (r *Reconciler) topicsOfCluster(ctx context.Context, o ctrlclient.Object) []ctrl.Request {
	var list naradv1.TopicList
	if err := r.Client.List(ctx, &list, ctrlclient.InNamespace(o.GetNamespace()),
		ctrlclient.MatchingFields{clusterRefIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list topics of cluster", "cluster", o.GetName())
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: ctrlclient.ObjectKeyFromObject(&t)})
	}
	return reqs
}

// Reconcile brings one Topic's broker topic in line with its spec, or cleans it up when the
// object is being deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t naradv1.Topic
	if err := r.Client.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if pause.Requested(&t) {
		return r.paused(ctx, &t)
	}
	if !t.DeletionTimestamp.IsZero() {
		return clusterref.RequeueOnConflict(r.finalize(ctx, &t))
	}
	if t.Spec.Name == "" {
		// The CEL rule makes the name immutable from here on.
		patch := ctrlclient.MergeFrom(t.DeepCopy())
		t.Spec.Name = t.Name
		if err := r.Client.Patch(ctx, &t, patch); err != nil {
			return clusterref.RequeueOnConflict(ctrl.Result{}, fmt.Errorf("write spec.name: %w", err))
		}
	}
	before := t.Status.DeepCopy()
	if _, flipped, _ := pause.Mark(&t.Status.Conditions, &t); flipped {
		r.event(&t, "Normal", "ReconcileResumed", "Reconcile", "the %s annotation is gone: reconciling again", naradv1.PauseReconcileAnnotation)
	}
	st := newStatus(&t)
	err := r.sync(ctx, &t, st)
	if err != nil {
		return clusterref.RequeueOnConflict(ctrl.Result{}, err)
	}
	st.settle()
	resync := r.ResyncPeriod
	if st.underReplicated() {
		resync = min(resync, underReplicatedRequeue)
	}
	return clusterref.Finish(ctx, r.Client, &t, !equality.Semantic.DeepEqual(before, &t.Status), st.waiting(),
		t.Status.Conditions, resync)
}

// paused only records that t is paused (docs/kubernetes.md "Pausing reconciliation"): no broker
// call, no finalizer work, no requeue; removing the annotation wakes the controller again.
func (r *Reconciler) paused(ctx context.Context, t *naradv1.Topic) (ctrl.Result, error) {
	_, flipped, changed := pause.Mark(&t.Status.Conditions, t)
	if flipped {
		r.event(t, "Normal", "ReconcilePaused", "Reconcile", "the %s annotation is \"true\": changing nothing until it is removed", naradv1.PauseReconcileAnnotation)
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	return clusterref.RequeueOnConflict(ctrl.Result{}, r.Client.Status().Update(ctx, t))
}

// sync does one pass against the brokers and records what it saw in st. Only Kubernetes API
// failures are returned as errors; broker trouble ends up in st.
func (r *Reconciler) sync(ctx context.Context, t *naradv1.Topic, st *status) error {
	nc, cl, reason, msg := clusterref.Connect(ctx, r.Client, r.Brokers, t.Namespace, t.Spec.ClusterRef.Name)
	if cl == nil {
		st.notReady(reason, msg)
		return nil
	}
	// seed: finalizer before the first broker create, so no broker topic outlives its object
	if err := clusterref.AddFinalizer(ctx, r.Client, t, naradv1.TopicFinalizer); err != nil {
		return err
	}
	d, err := r.ensureExists(ctx, t, cl, st)
	if err != nil || d == nil {
		return err
	}
	r.correctDrift(ctx, t, cl, d, st)
	if err := r.applySchema(ctx, t, cl, d, st); err != nil {
		return err
	}
	st.observe(d, backlogOf(ctx, r.Brokers, nc, d))
	observeReplication(ctx, cl, t.Spec.Name, st)
	return nil
}

// ensureExists describes the broker topic, creating it when missing (first time, or deleted
// behind the operator's back) and announcing an adoption of one that already existed. It
// returns nil and sets conditions when the topic could not be described or created.
func (r *Reconciler) ensureExists(ctx context.Context, t *naradv1.Topic, cl *client.Client, st *status) (*client.TopicDetail, error) {
	name := t.Spec.Name
	known := t.Status.Partitions > 0 // the operator has seen this broker topic before
	d, err := cl.GetTopic(ctx, name, nil)
	switch {
	case err == nil:
		if !known {
			r.event(t, "Normal", "Adopted", "Adopt", "adopted the existing broker topic %q", name)
		}
		return d, nil
	case !client.IsStatus(err, 404):
		st.notReady("BrokerError", fmt.Sprintf("describe topic %q: %v", name, err))
		return nil, nil
	}
	created, err := cl.CreateTopic(ctx, createRequest(t))
	switch {
	case err == nil:
		if known {
			r.event(t, "Warning", "TopicRecreated", "Create", "broker topic %q was deleted outside the operator; created it again", name)
		} else {
			r.event(t, "Normal", "Created", "Create", "created broker topic %q with %d partitions", name, created.Partitions)
		}
		if err := r.markSchemaApplied(ctx, cl, t, name); err != nil {
			return nil, err
		}
	case client.IsStatus(err, 409): // created meanwhile by someone else: adopt it below
		r.event(t, "Normal", "Adopted", "Adopt", "broker topic %q appeared while creating it; adopting it", name)
	case isRejection(err):
		reason := "CreateRejected"
		if t.Spec.Schema != nil && mentionsSchema(err) {
			reason = "SchemaRejected"
		}
		st.degraded(reason, fmt.Sprintf("the brokers refused to create topic %q: %v", name, err))
		return nil, nil
	default:
		st.notReady("BrokerError", fmt.Sprintf("create topic %q: %v", name, err))
		return nil, nil
	}
	if d, err = cl.GetTopic(ctx, name, nil); err != nil {
		st.notReady("BrokerError", fmt.Sprintf("describe topic %q after create: %v", name, err))
		return nil, nil
	}
	return d, nil
}

// correctDrift alters the broker topic where it differs from the spec (schema aside).
func (r *Reconciler) correctDrift(ctx context.Context, t *naradv1.Topic, cl *client.Client, d *client.TopicDetail, st *status) {
	alter, shrink := driftAlter(t.Spec, d.Topic)
	if shrink {
		st.degraded("PartitionsShrinkRefused", fmt.Sprintf(
			"the broker topic has %d partitions, more than spec.partitions %d; partitions never shrink",
			d.Partitions, t.Spec.Partitions))
	}
	// The replication settings go in a PATCH of their own: a refusal of those (R 1 ↔ ≥ 2) does
	// not hold back the other fields.
	base, repl := splitReplication(alter)
	for _, a := range []client.AlterTopicRequest{base, repl} {
		if !a.Empty() {
			r.alter(ctx, t, cl, d, st, a)
		}
	}
}

// alter sends one PATCH and records its outcome.
func (r *Reconciler) alter(ctx context.Context, t *naradv1.Topic, cl *client.Client, d *client.TopicDetail, st *status, alter client.AlterTopicRequest) {
	nt, err := cl.AlterTopic(ctx, t.Spec.Name, alter)
	switch {
	case err == nil:
		r.event(t, "Normal", "Altered", "Alter", "altered broker topic %q: %s", t.Spec.Name, describeAlter(alter))
		d.Topic = *nt
		if alter.Partitions != nil { // new partitions: refresh the per-partition stats
			if nd, err := cl.GetTopic(ctx, t.Spec.Name, nil); err == nil {
				*d = *nd
			}
		}
	case isRejection(err):
		reason := "AlterRejected"
		if client.IsStatus(err, 409) && alter.ReplicationFactor != nil {
			// R 1 ↔ ≥ 2 on a live topic (docs/replication.md, Settings): only a new topic can.
			reason = "ReplicationChangeRefused"
		}
		st.degraded(reason, fmt.Sprintf("the brokers refused to alter topic %q (%s): %v",
			t.Spec.Name, describeAlter(alter), err))
	default:
		st.notReady("BrokerError", fmt.Sprintf("alter topic %q: %v", t.Spec.Name, err))
	}
}

// event records an event on t.
func (r *Reconciler) event(t *naradv1.Topic, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(t, nil, typ, reason, action, note, args...)
	}
}

// isRejection reports whether the brokers refused a request as it stands (4xx): retrying it
// unchanged cannot succeed, so it is shown as Degraded rather than retried quickly.
func isRejection(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != 429
}
