package podrunner

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// LoseVolume plays the loss of pod ns/pod's node together with its disk, as far as the pod
// runner's world allows: claim ns/claim is deleted (its kubernetes.io/pvc-protection finalizer
// keeps the object while the pod object uses it, as in a cluster), the pod's process is killed
// with SIGKILL and the claim's data directory is removed. The pod object stays and its
// container cannot start again (its claim is being deleted: the start fails and is retried
// after RestartBackoff, like a crash loop) until someone deletes the pod; then the runner, as
// the StatefulSet controller, creates a fresh claim and pod once the old claim is gone.
func (r *Runner) LoseVolume(ctx context.Context, ns, pod, claim string) error {
	var pvc corev1.PersistentVolumeClaim
	if err := r.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: claim}, &pvc); err != nil {
		return fmt.Errorf("podrunner: claim %s/%s: %w", ns, claim, err)
	}
	c := r.runningContainer(ns, pod)
	if c == nil {
		return fmt.Errorf("podrunner: no running process for pod %s/%s", ns, pod)
	}
	dir := r.ClaimDir(ns, claim)
	if dir == "" {
		return fmt.Errorf("podrunner: pod %s/%s has no data directory for claim %s", ns, pod, claim)
	}
	uid := pvc.UID
	if err := r.cl.Delete(ctx, &pvc, ctrlclient.Preconditions{UID: &uid}); err != nil {
		return fmt.Errorf("podrunner: delete claim %s/%s: %w", ns, claim, err)
	}
	exited := c.currentExit()
	c.signal(syscall.SIGCONT) // a paused process is killed all the same
	c.signal(syscall.SIGKILL)
	if exited != nil {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("podrunner: pod %s/%s did not exit after SIGKILL", ns, pod)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("podrunner: remove the data of claim %s/%s: %w", ns, claim, err)
	}
	r.logf("pod %s/%s: volume lost (claim %s deleted, process killed, %s removed)", ns, pod, claim, dir)
	c.appendLog("podrunner: " + time.Now().Format(time.RFC3339Nano) + " volume lost: claim " + claim + " deleted, data removed")
	return nil
}

// runningContainer is the container of pod ns/pod that is not terminating, or nil.
func (r *Runner) runningContainer(ns, pod string) *container {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.ns == ns && c.name == pod && !c.state().terminating {
			return c
		}
	}
	return nil
}
