package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// dumpCluster prints what an operator would look at after a failure: the NaradCluster's status
// (kubectl get -o yaml), the StatefulSet's, the pods and claims, the recent history of the
// highest ordinals, the traffic counts and every pod's log tail.
func dumpCluster(nc *naradv1.NaradCluster, tl *timeline, load *traffic) {
	if nc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := GinkgoWriter
	var cur naradv1.NaradCluster
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: nc.Name}, &cur); err == nil {
		b, _ := yaml.Marshal(map[string]any{"generation": cur.Generation, "spec.replicas": cur.Spec.Replicas, "status": cur.Status})
		fmt.Fprintf(w, "\n===== NaradCluster %s/%s =====\n%s", nc.Namespace, nc.Name, b)
	}
	var sts appsv1.StatefulSet
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: naming.StatefulSet(nc)}, &sts); err == nil {
		b, _ := yaml.Marshal(map[string]any{"spec.replicas": sts.Spec.Replicas, "status": sts.Status})
		fmt.Fprintf(w, "===== StatefulSet =====\n%s", b)
	}
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, ctrlclient.InNamespace(nc.Namespace)); err == nil {
		fmt.Fprintf(w, "===== pods =====\n")
		for _, p := range pods.Items {
			restarts := int32(0)
			if len(p.Status.ContainerStatuses) > 0 {
				restarts = p.Status.ContainerStatuses[0].RestartCount
			}
			fmt.Fprintf(w, "%-12s %-8s ready=%-5v ip=%-14s restarts=%d revision=%s deleting=%v\n", p.Name, p.Status.Phase,
				podReady(&p), p.Status.PodIP, restarts, p.Labels[appsv1.ControllerRevisionHashLabelKey], p.DeletionTimestamp != nil)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := k8s.List(ctx, &pvcs, ctrlclient.InNamespace(nc.Namespace)); err == nil {
		var names []string
		for _, c := range pvcs.Items {
			names = append(names, fmt.Sprintf("%s(%s, deleting=%v)", c.Name, c.Status.Phase, c.DeletionTimestamp != nil))
		}
		fmt.Fprintf(w, "===== PVCs: %s\n", strings.Join(names, " "))
	}
	if tl != nil {
		for _, o := range []int32{4, 3, 2} {
			fmt.Fprintf(w, "===== timeline of %s (last 3 min) =====\n%s", naming.NodeID(nc, o),
				describe(tl.since(time.Now().Add(-3*time.Minute)), naming.NodeID(nc, o)))
		}
	}
	if load != nil {
		fmt.Fprintf(w, "===== traffic: %s\n", load)
	}
	for _, p := range runner.Pods() {
		if strings.HasPrefix(p, nc.Namespace+"/") {
			fmt.Fprintf(w, "===== log tail of %s =====\n%s\n", p, runner.LogTail(p, 30))
		}
	}
}
