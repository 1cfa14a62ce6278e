// Package user reconciles NaradUser objects with broker users through the admin API
// (docs/kubernetes.md#users).
//
// A NaradUser is level-reconciled like a Topic: every pass reads the broker user, creates it
// when missing, applies a password the brokers have not been given yet and puts back grants
// changed on the brokers, then requeues after ResyncPeriod. The password comes from the
// Secret spec.passwordSecretRef names, or from a Secret the operator generates and owns.
//
// Files by concern: reconciler.go (watches and the pass), password.go (where the password
// comes from: the referenced Secret, or the generated one and its rotation), broker.go (the
// admin calls: create, password, grants), duplicate.go (two objects naming one broker user),
// delete.go (the finalizer), status.go (conditions).
//
// The password never reaches a log line, an event or the status: status records only which
// Secret version (uid and resourceVersion) the brokers were last given.
package user

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/controller/clusterref"
)

// Reconciler reconciles one NaradUser at a time.
type Reconciler struct {
	Client ctrlclient.Client
	// APIReader reads the NaradUser and its Secrets past the cache: what the previous pass
	// wrote (or deleted) must be seen as it is, or a pass could take a just-created Secret for
	// a deleted one and rotate the password again.
	APIReader ctrlclient.Reader
	Scheme    *runtime.Scheme
	Brokers   *brokers.Connector
	Recorder  events.EventRecorder
	// ResyncPeriod is how often a reconciled NaradUser is compared with the brokers again
	// (grant drift).
	ResyncPeriod time.Duration
}

// Field indexes of NaradUsers, so that an event on a NaradCluster or a Secret wakes exactly
// the users that reference it.
const (
	clusterRefIndex     = "naraduser-controller:spec.clusterRef.name"
	passwordSecretIndex = "naraduser-controller:spec.passwordSecretRef.name"
)

// SetupWithManager registers the controller: NaradUsers (creation, spec changes, deletion),
// the generated Secrets they own (a deleted one is rotated), the Secrets their
// passwordSecretRef names (a changed password is applied) and the NaradClusters they
// reference (created, deleted, Ready flipped).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ix := mgr.GetFieldIndexer()
	if err := ix.IndexField(context.Background(), &naradv1.NaradUser{}, clusterRefIndex,
		func(o ctrlclient.Object) []string { return []string{o.(*naradv1.NaradUser).Spec.ClusterRef.Name} }); err != nil {
		return fmt.Errorf("index naradusers by cluster: %w", err)
	}
	if err := ix.IndexField(context.Background(), &naradv1.NaradUser{}, passwordSecretIndex,
		func(o ctrlclient.Object) []string {
			if ref := o.(*naradv1.NaradUser).Spec.PasswordSecretRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}); err != nil {
		return fmt.Errorf("index naradusers by password secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("naraduser").
		For(&naradv1.NaradUser{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Secret{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.usersOf(passwordSecretIndex))).
		Watches(&naradv1.NaradCluster{}, handler.EnqueueRequestsFromMapFunc(r.usersOf(clusterRefIndex)),
			builder.WithPredicates(clusterref.AvailabilityChanged())).
		Complete(r)
}

// usersOf maps an object to the NaradUsers of its namespace whose field index names it.
func (r *Reconciler) usersOf(index string) handler.MapFunc {
	return func(ctx context.Context, o ctrlclient.Object) []ctrl.Request {
		var list naradv1.NaradUserList
		if err := r.Client.List(ctx, &list, ctrlclient.InNamespace(o.GetNamespace()),
			ctrlclient.MatchingFields{index: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "list naradusers", "index", index, "name", o.GetName())
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(list.Items))
		for _, u := range list.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: ctrlclient.ObjectKeyFromObject(&u)})
		}
		return reqs
	}
}

// Reconcile brings one NaradUser's broker user in line with its spec, or deletes it when the
// object is being deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read past the cache: status.passwordSecretVersion must be the one the last pass wrote,
	// or the pass would give the brokers the same password again and take it for an adoption.
	var u naradv1.NaradUser
	if err := r.APIReader.Get(ctx, req.NamespacedName, &u); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if !u.DeletionTimestamp.IsZero() {
		return clusterref.RequeueOnConflict(r.finalize(ctx, &u))
	}
	if u.Spec.Username == "" {
		// The CEL rule makes the username immutable from here on.
		patch := ctrlclient.MergeFrom(u.DeepCopy())
		u.Spec.Username = u.Name
		if err := r.Client.Patch(ctx, &u, patch); err != nil {
			return clusterref.RequeueOnConflict(ctrl.Result{}, fmt.Errorf("write spec.username: %w", err))
		}
	}
	before := u.Status.DeepCopy()
	st := newStatus(&u)
	if err := r.sync(ctx, &u, st); err != nil {
		return clusterref.RequeueOnConflict(ctrl.Result{}, err)
	}
	st.settle()
	return clusterref.Finish(ctx, r.Client, &u, !equality.Semantic.DeepEqual(before, &u.Status), st.waiting(),
		u.Status.Conditions, r.ResyncPeriod)
}

// sync does one pass against the brokers and records what it did in st. Only Kubernetes API
// failures are returned as errors; broker trouble and bad Secrets end up in st.
func (r *Reconciler) sync(ctx context.Context, u *naradv1.NaradUser, st *status) error {
	nc, cl, reason, msg := clusterref.Connect(ctx, r.Client, r.Brokers, u.Namespace, u.Spec.ClusterRef.Name)
	if cl == nil {
		st.wait(reason, msg)
		return nil
	}
	// seed: finalizer before the first broker create, so no broker user outlives its object
	if err := clusterref.AddFinalizer(ctx, r.Client, u, naradv1.NaradUserFinalizer); err != nil {
		return err
	}
	b := &brokerUser{r: r, u: u, cl: cl, name: u.BrokerUsername(), st: st}
	st.username = b.name
	others, err := r.sameUser(ctx, u)
	if err != nil {
		return err
	}
	if o := first(u, others); o != nil {
		st.fail("DuplicateUsername", fmt.Sprintf("NaradUser %q already manages broker user %q", o.Name, b.name))
		return nil
	}
	if !b.lookup(ctx) {
		return nil
	}
	src, err := r.passwordSource(ctx, u, nc, st)
	if err != nil || src == nil {
		return err
	}
	st.secretName = src.secretName
	if src.rotate {
		if ok, err := r.rotate(ctx, u, nc, b, src); !ok {
			return err
		}
	} else if !b.exists() || src.version != st.prevApplied {
		if !b.setPassword(ctx, src.password, src.secretName) {
			return nil
		}
		st.applied = src.version
	}
	b.correctGrants(ctx)
	return nil
}

// secretKey is the key of the Secret name in u's namespace.
func secretKey(u *naradv1.NaradUser, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: u.Namespace, Name: name}
}

// event records an event on u. Callers never pass a password.
func (r *Reconciler) event(u *naradv1.NaradUser, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(u, nil, typ, reason, action, note, args...)
	}
}
