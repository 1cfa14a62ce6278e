package cluster

import (
	"context"
	"errors"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/internal/controller/pause"
	"narad.dev/operator/naming"
)

// Requeue periods besides Reconciler.StatusInterval.
const (
	// progressRequeue: while pods start, roll or moves run, status and the next rolling step
	// follow this closely.
	progressRequeue = 2 * time.Second
	// blockedRequeue: a missing Secret or CRD is looked for again this often (the Secret watch
	// usually notices sooner).
	blockedRequeue = 10 * time.Second
	// defaultStatusInterval is used when StatusInterval is zero.
	defaultStatusInterval = 30 * time.Second
)

// Reconcile brings one NaradCluster towards its spec: Secrets, config, Services, PDB,
// add-ons, the StatefulSet (its replica count decided by the scale code), a rolling restart
// step, and the status. It is level-based: every step is recomputed from what exists.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if errors.Is(err, errCacheLag) || apierrors.IsConflict(err) {
		// The informer cache trails a write; the next reconcile sees it.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var nc naradv1.NaradCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &nc); err != nil {
		return ctrl.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if pause.Requested(&nc) {
		return ctrl.Result{}, r.paused(ctx, &nc)
	}
	if nc.DeletionTimestamp != nil {
		return r.finalize(ctx, &nc)
	}
	if err := r.ensureFinalizer(ctx, &nc); err != nil {
		return ctrl.Result{}, err
	}
	st := nc.Status.DeepCopy()
	r.markResumed(&nc, st)
	res, err := r.sync(ctx, &nc, st)
	if serr := r.patchStatus(ctx, &nc, st); serr != nil {
		if err == nil {
			err = serr
		} else {
			log.FromContext(ctx).Error(serr, "status not written")
		}
	}
	return res, err
}

func (r *Reconciler) statusInterval() time.Duration {
	if r.StatusInterval > 0 {
		return r.StatusInterval
	}
	return defaultStatusInterval
}

// sync does the work of Reconcile into st.
func (r *Reconciler) sync(ctx context.Context, nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus) (ctrl.Result, error) {
	var generated *corev1.Secret
	if usesGeneratedSecret(nc) {
		var err error
		if generated, err = r.ensureGeneratedSecret(ctx, nc); err != nil {
			return ctrl.Result{}, err
		}
	}
	cm := desiredConfigMap(nc)
	for _, obj := range []ctrlclient.Object{cm, desiredHeadlessService(nc), desiredClientService(nc)} {
		if err := r.apply(ctx, nc, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	v := &view{}
	var err error
	if v.note, err = r.reconcileServiceMonitor(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileRackAccess(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	if v.blocker, err = r.reconcileCertificate(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	versions, secretBlock, err := r.checkSecrets(ctx, nc, generated)
	if err != nil {
		return ctrl.Result{}, err
	}
	if v.blocker == nil {
		v.blocker = secretBlock
	}
	if v.blocker == nil {
		v.blocker = r.versionBlocker(nc)
	}
	if v.pods, err = r.listPods(ctx, nc); err != nil {
		return ctrl.Result{}, err
	}
	v.obs = r.observe(ctx, nc, v.pods)
	v.health = r.readReplicaHealth(ctx, nc, v.obs)
	if v.disruption, err = r.reconcileDisruptions(ctx, nc, st, v.health); err != nil {
		return ctrl.Result{}, err
	}

	sts := &appsv1.StatefulSet{}
	found, err := r.exists(ctx, ctrlclient.ObjectKey{Namespace: nc.Namespace, Name: naming.StatefulSet(nc)}, sts)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !found {
		sts = nil
	} else if sts.Spec.Replicas != nil {
		v.replicas = *sts.Spec.Replicas
	}
	if v.blocker != nil {
		// Nothing the pods need may be missing when their template is written; the pods that
		// run keep running as they are.
		r.fillStatus(nc, st, v)
		return ctrl.Result{RequeueAfter: min(r.statusInterval(), blockedRequeue)}, nil
	}

	if v.volumeLoss, err = r.reconcileVolumeLoss(ctx, nc, st, v.pods, v.replicas); err != nil {
		r.fillStatus(nc, st, v)
		return ctrl.Result{}, err
	}
	replicas, scaleRequeue, err := r.scale(ctx, nc, sts, v.obs, st)
	if err != nil {
		r.fillStatus(nc, st, v)
		return ctrl.Result{}, err
	}
	if storageChangeIgnored(nc, sts) && nc.Generation != nc.Status.ObservedGeneration {
		r.event(nc, corev1.EventTypeWarning, "StorageChangeIgnored", "Reconcile",
			"spec.storage.storageClassName changed, but a StatefulSet's volume claim template cannot: existing and new pods keep the original class")
	}
	hash := configHash(cm.Data[naming.ConfigFileName], versions)
	if err := r.apply(ctx, nc, r.desiredStatefulSet(nc, replicas, hash, sts)); err != nil {
		r.fillStatus(nc, st, v)
		return ctrl.Result{}, err
	}
	v.created, v.replicas = sts == nil, replicas
	if v.resizing, err = r.reconcileStorage(ctx, nc, st, sts, replicas); err != nil {
		r.fillStatus(nc, st, v)
		return ctrl.Result{}, err
	}
	if sts != nil && !r.scalingDown(nc, st) {
		if v.roll, err = r.roll(ctx, nc, sts, v.pods, v.obs.leader(), v.health); err != nil {
			r.fillStatus(nc, st, v)
			return ctrl.Result{}, err
		}
	}
	r.fillStatus(nc, st, v)

	requeue := r.statusInterval()
	if conditionTrue(st, naradv1.ConditionProgressing) || conditionTrue(st, naradv1.ConditionRebalancing) ||
		v.roll.Outdated > 0 || (v.obs.Err != nil && readyPods(v.pods) > 0) {
		requeue = min(requeue, progressRequeue)
	}
	if scaleRequeue > 0 {
		requeue = min(requeue, scaleRequeue)
	}
	if v.volumeLoss || v.resizing {
		requeue = min(requeue, progressRequeue)
	}
	if v.disruption.Blocked {
		requeue = min(requeue, disruptionRequeue)
	}
	if conditionTrue(st, naradv1.ConditionUnderReplicated) {
		requeue = min(requeue, underReplicatedRequeue)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func conditionTrue(st *naradv1.NaradClusterStatus, t string) bool {
	c := findCondition(st.Conditions, t)
	return c != nil && c.Status == "True"
}

// listPods returns nc's broker pods sorted by name.
func (r *Reconciler) listPods(ctx context.Context, nc *naradv1.NaradCluster) ([]corev1.Pod, error) {
	var pl corev1.PodList
	if err := r.Client.List(ctx, &pl, ctrlclient.InNamespace(nc.Namespace), ctrlclient.MatchingLabels(naming.Selector(nc))); err != nil {
		return nil, err
	}
	sort.Slice(pl.Items, func(i, j int) bool { return pl.Items[i].Name < pl.Items[j].Name })
	return pl.Items, nil
}
