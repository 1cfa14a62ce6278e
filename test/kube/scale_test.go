package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// describeScale: `kubectl narad scale` down to 2 under traffic (the highest broker drained,
// then gone) and back up to 3 (the new broker receives partitions).
func describeScale() {
	var plugin string // the directory of the kubectl-narad binary, built from the tree

	It("scales to 2 with kubectl narad while traffic flows: the highest broker drains and goes, losing nothing", func(ctx SpecContext) {
		plugin = buildPlugin(ctx)
		nc := clusterObject()
		leaving := naming.NodeID(nc, 2)
		Expect(replicasOn(ctx, leaving)).NotTo(BeEmpty(), "%s holds no partition to move", leaving)
		l := startLoad(ctx, topicName, "scaledown")

		began := time.Now()
		out, err := kubectlNarad(plugin, "scale", ncKey.Name, "--to", "2", "--yes")
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("kubectl narad scale --to 2", out)

		Eventually(ctx, func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, ncKey, &sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(2))
			gone := func(obj string, err error) {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s still there (%v)", obj, err)
			}
			gone("pod "+leaving, k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: leaving}, &corev1.Pod{}))
			gone("claim "+naming.PVC(nc, 2), k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: naming.PVC(nc, 2)},
				&corev1.PersistentVolumeClaim{}))
			readyWith(g, ctx, 2)
			cur := clusterObject()
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionDraining)).To(BeTrue(), "Draining False")
			g.Expect(replicasOn(ctx, leaving)).To(BeEmpty(), "partitions still on %s", leaving)
		}).WithTimeout(8 * time.Minute).Should(Succeed())
		AddReportEntry("scaled down and Ready after", time.Since(began).Round(time.Second))

		members, err := svc.Client.ClusterMembers(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range members.Members {
			if m.ID == leaving {
				// The brokers keep a removed node's record (out of Raft, owning nothing) until
				// their member GC collects it.
				Expect(m.RaftRole).To(Equal("none"), "removed node %+v", m)
				Expect(m.OwnedPartitions).To(BeZero(), "removed node %+v", m)
				continue
			}
			Expect(m.Status).To(Equal(client.StatusAlive), "member %+v", m)
		}
		Expect(l.history.AcceptedBetween(topicName, began, time.Now())).NotTo(BeEmpty(), "no message accepted while the broker drained")
		l.waitAccepted(ctx, 50)
		l.accountFor(ctx, topicName)
		Expect(recycleVolumes(ctx)).To(Succeed()) // the leaving broker's claim was deleted
	}, NodeTimeout(12*time.Minute))

	It("scales back to 3 with kubectl narad: the new broker joins and receives partitions", func(ctx SpecContext) {
		Expect(plugin).NotTo(BeEmpty(), "the scale-down spec builds the plugin")
		joining := naming.NodeID(clusterObject(), 2)
		l := startLoad(ctx, topicName, "scaleup")

		began := time.Now()
		out, err := kubectlNarad(plugin, "scale", ncKey.Name, "--to", "3")
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("kubectl narad scale --to 3", out)
		Eventually(ctx, func(g Gomega) {
			readyWith(g, ctx, 3)
			members, err := svc.Client.ClusterMembers(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(members.Members).To(ContainElement(And(
				HaveField("ID", joining), HaveField("Status", client.StatusAlive))), "%s alive", joining)
			g.Expect(replicasOn(ctx, joining)).NotTo(BeEmpty(), "no partition rebalanced onto %s", joining)
			g.Expect(underReplicated(ctx)).To(BeEmpty())
			cur := clusterObject()
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionRebalancing)).To(BeFalse(), "Rebalancing")
		}).WithTimeout(8 * time.Minute).Should(Succeed())
		AddReportEntry("scaled up, rebalanced and Ready after", time.Since(began).Round(time.Second))
		on, err := replicasOn(ctx, joining)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("partitions on "+joining, on)

		l.waitAccepted(ctx, 50)
		l.accountFor(ctx, topicName)
	}, NodeTimeout(10*time.Minute))
}

// replicasOn lists the partitions ("topic/partition") with a copy on node.
func replicasOn(ctx context.Context, node string) ([]string, error) {
	ps, err := svc.Client.AllClusterPartitions(ctx, false)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, p := range ps {
		if slices.Contains(p.Replicas, node) {
			out = append(out, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
		}
	}
	return out, nil
}

// buildPlugin builds kubectl-narad from the tree (operator/cmd/kubectl-narad) into a
// directory of its own under the cluster's state directory and returns it: kubectl finds the
// plugin on PATH, as a user's would.
func buildPlugin(ctx context.Context) string {
	GinkgoHelper()
	dir := filepath.Join(stateDir, "plugin")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "kubectl-narad"), "./operator/cmd/kubectl-narad")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build kubectl-narad: %s", out)
	return dir
}

// kubectlNarad runs `kubectl narad ARGS… -n <suite namespace>` with the plugin of dir on
// PATH and the cluster's admin kubeconfig in KUBECONFIG (kubectl passes no flags before the
// plugin name on to it).
func kubectlNarad(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(kubeBin, "kubectl"), append(append([]string{"narad"}, args...), "-n", suiteNS)...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl narad %v: %w: %s", args, err, out)
	}
	return string(out), nil
}
