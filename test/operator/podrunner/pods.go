package podrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/naming"
)

// tick is one pass: pods gone or being deleted, then every StatefulSet, then PVCs.
func (r *Runner) tick(ctx context.Context) error {
	var sets appsv1.StatefulSetList
	if err := r.cl.List(ctx, &sets, ctrlclient.MatchingLabels{naming.LabelName: naming.AppName}); err != nil {
		return fmt.Errorf("list statefulsets: %w", err)
	}
	var pods corev1.PodList // every pod this runner's "node" hosts, whatever its labels
	if err := r.cl.List(ctx, &pods, ctrlclient.MatchingFields{"spec.nodeName": NodeName}); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	setByUID := map[types.UID]*appsv1.StatefulSet{}
	for i := range sets.Items {
		setByUID[sets.Items[i].UID] = &sets.Items[i]
	}
	podsBySet := map[types.UID][]*corev1.Pod{}
	live := map[types.UID]bool{}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != NodeName {
			continue
		}
		live[p.UID] = true
		owner := ctrlOwner(p)
		if p.DeletionTimestamp != nil {
			r.podDeleting(ctx, p)
			podsBySet[owner] = append(podsBySet[owner], p) // counted until gone; never recreated meanwhile
			continue
		}
		if _, ok := setByUID[owner]; !ok {
			// The StatefulSet is gone: play the garbage collector.
			errs = append(errs, ignoreNotFound(r.cl.Delete(ctx, p, ctrlclient.Preconditions{UID: &p.UID})))
			continue
		}
		podsBySet[owner] = append(podsBySet[owner], p)
		r.adopt(ctx, p)
	}
	r.reapVanished(live)
	for _, s := range setByUID {
		if s.DeletionTimestamp != nil {
			continue
		}
		if err := r.syncSet(ctx, s, podsBySet[s.UID]); err != nil {
			errs = append(errs, fmt.Errorf("statefulset %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	errs = append(errs, r.syncClaims(ctx, &pods))
	return errors.Join(errs...)
}

func ctrlOwner(p *corev1.Pod) types.UID {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "StatefulSet" {
			return o.UID
		}
	}
	return ""
}

// podDeleting starts the graceful termination of a pod with a deletionTimestamp (once).
func (r *Runner) podDeleting(ctx context.Context, p *corev1.Pod) {
	r.mu.Lock()
	c, ok := r.containers[p.UID]
	if ok && c.state().terminating {
		r.mu.Unlock()
		return
	}
	if ok {
		c.mu.Lock()
		c.terminating = true
		c.mu.Unlock()
	}
	r.mu.Unlock()
	if !ok {
		// Not ours to run (or already stopped): finish the deletion.
		_ = ignoreNotFound(r.cl.Delete(ctx, p, ctrlclient.GracePeriodSeconds(0), ctrlclient.Preconditions{UID: &p.UID}))
		return
	}
	r.spawn(func() { c.terminate(r.ctx) })
}

// reapVanished kills the processes of pods whose objects are gone (deleted without grace).
func (r *Runner) reapVanished(live map[types.UID]bool) {
	r.mu.Lock()
	var gone []*container
	for uid, c := range r.containers {
		if !live[uid] && !c.state().terminating { // a terminating one is finished by terminate
			gone = append(gone, c)
			delete(r.containers, uid)
		}
	}
	r.mu.Unlock()
	for _, c := range gone {
		r.logf("pod %s/%s: object gone; stopping its process", c.ns, c.name)
		r.spawn(func() { c.shutdown(terminationCap) })
	}
}

// adopt starts a container for a live pod of ours that has none (a pod created before this
// runner started, e.g. by an earlier runner of the same API server).
func (r *Runner) adopt(ctx context.Context, p *corev1.Pod) {
	r.mu.Lock()
	_, ok := r.containers[p.UID]
	r.mu.Unlock()
	if !ok {
		r.startContainer(ctx, p)
	}
}

// startContainer registers and starts the container of pod p.
func (r *Runner) startContainer(ctx context.Context, p *corev1.Pod) {
	sts, ord, ok := splitOrdinal(p.Name)
	if !ok {
		return
	}
	ip := r.IP(p.Namespace, sts, ord)
	if ip == "" {
		return
	}
	dir := filepath.Join(r.root, "pods", p.Namespace, p.Name+"-"+string(p.UID)[:8])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.logf("pod %s/%s: %v", p.Namespace, p.Name, err)
		return
	}
	logDir := filepath.Join(r.root, "logs", p.Namespace)
	_ = os.MkdirAll(logDir, 0o755)
	c := &container{
		r: r, ns: p.Namespace, name: p.Name, uid: p.UID, ip: ip, pod: p.DeepCopy(), dir: dir,
		logPath: filepath.Join(logDir, p.Name+".log"),
		stopCh:  make(chan struct{}), done: make(chan struct{}),
	}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.containers[p.UID] = c
	r.logs[p.Namespace+"/"+p.Name] = c.logPath
	r.mu.Unlock()
	r.logf("pod %s/%s: starting on %s (revision %s)", p.Namespace, p.Name, ip, p.Labels[appsv1.ControllerRevisionHashLabelKey])
	r.spawn(func() { c.loop(r.ctx) })
	r.spawn(func() { c.probe(r.ctx) })
}

// spawn runs f on a goroutine Stop waits for.
func (r *Runner) spawn(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// deletePodNow finishes a graceful deletion (GracePeriodSeconds=0), as the kubelet does once
// the containers are gone, and forgets the container.
func (r *Runner) deletePodNow(ctx context.Context, c *container) {
	p := &corev1.Pod{}
	p.Namespace, p.Name = c.ns, c.name
	uid := c.uid
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := r.cl.Delete(ctx, p, ctrlclient.GracePeriodSeconds(0), ctrlclient.Preconditions{UID: &uid})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				r.logf("pod %s/%s: final delete: %v", c.ns, c.name, err)
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.mu.Lock()
	if r.containers[uid] == c {
		delete(r.containers, uid)
	}
	r.mu.Unlock()
	_ = os.RemoveAll(c.dir)
	r.logf("pod %s/%s: deleted", c.ns, c.name)
}

// patchPodStatus replaces the pod's status fields the runner owns (merge patch on the status
// subresource, only while the pod is still the one with uid).
func (r *Runner) patchPodStatus(ctx context.Context, ns, name string, uid types.UID, st corev1.PodStatus) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": st})
	if err != nil {
		return err
	}
	p := &corev1.Pod{}
	p.Namespace, p.Name = ns, name
	err = r.cl.Status().Patch(ctx, p, ctrlclient.RawPatch(types.MergePatchType, body))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the pod is gone (or replaced): nothing to report on
	}
	return err
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
