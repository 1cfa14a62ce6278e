package podrunner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/rack"
)

// Init containers: the runner runs a pod's init containers once, before the broker's first
// start, as a kubelet does. The only one the operator's pods have is the rack writer (the
// operator image's `manager rack`, docs/kubernetes.md "Racks and placement"); the runner runs
// it in-process through the same code (rack.Write) with its own client, against the Node
// object it keeps for its pods. Any other init container is refused as unsupported.

// ensureNode creates the Node the runner's pods are scheduled on (NodeName), so that the rack
// init container finds it; its zone label is Options.Zone when set.
func (r *Runner) ensureNode(ctx context.Context) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName}}
	if r.opts.Zone != "" {
		n.Labels = map[string]string{rack.ZoneLabel: r.opts.Zone}
	}
	if err := r.cl.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", NodeName, err)
	}
	return nil
}

// runInit runs c's pod's init containers in order; the first failure stops them (the
// container loop retries after its backoff, like a kubelet restarting a failed init container).
func (r *Runner) runInit(ctx context.Context, c *container) error {
	for _, ic := range c.pod.Spec.InitContainers {
		if err := r.runRackInit(ctx, c, ic); err != nil {
			return fmt.Errorf("init container %q: %w", ic.Name, err)
		}
	}
	return nil
}

// runRackInit runs the rack writer ic: its NODE_NAME resolved as the pod's env would be, its
// --file mapped onto the pod's materialized emptyDir.
func (r *Runner) runRackInit(ctx context.Context, c *container, ic corev1.Container) error {
	if len(ic.Command) < 2 || filepath.Base(ic.Command[0]) != "manager" || ic.Command[1] != rack.Subcommand {
		return fmt.Errorf("command %q is not the operator's rack writer; the pod runner runs no other init container", ic.Command)
	}
	var mounts []mountDir
	for _, m := range ic.VolumeMounts {
		for _, v := range c.pod.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			dir, err := r.materialize(ctx, c, v)
			if err != nil {
				return fmt.Errorf("volume %q: %w", v.Name, err)
			}
			mounts = append(mounts, mountDir{path: m.MountPath, dir: dir})
		}
	}
	paths := newPathMapper(mounts)
	vars := map[string]string{}
	for _, e := range ic.Env {
		v, skip, err := r.envValue(ctx, c, e, vars)
		if err != nil {
			return fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			vars[e.Name] = v
		}
	}
	args := make([]string, 0, len(ic.Command)+len(ic.Args)-2)
	for _, a := range append(append([]string(nil), ic.Command[2:]...), ic.Args...) {
		args = append(args, paths.rewriteArg(expand(a, vars)))
	}
	return rack.Run(ctx, args, func(k string) string { return vars[k] },
		func() (ctrlclient.Reader, error) { return r.cl, nil }, logWriter{c})
}

// logWriter appends what an in-process init container prints to its pod's log.
type logWriter struct{ c *container }

func (w logWriter) Write(p []byte) (int, error) {
	w.c.appendLog("init: " + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
