package kube

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

const ledgerTopic = "ledger" // three copies, two in sync for a 202

var ledgerManifest = fmt.Sprintf(`
apiVersion: narad.dev/v1alpha1
kind: Topic
metadata:
  name: %s
spec:
  clusterRef: {name: %s}
  partitions: 3
  replicationFactor: 3
  minInSyncReplicas: 2
`, ledgerTopic, ncKey.Name)

// describeVolumeLoss: a broker's volume destroyed under traffic, with onVolumeLoss Recreate.
func describeVolumeLoss() {
	It("gives a broker whose volume was destroyed a fresh one, and the brokers copy its replicas back, losing nothing", func(ctx SpecContext) {
		Expect(apply(suiteNS, ledgerManifest)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			var t naradv1.Topic
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: ledgerTopic}, &t)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "%+v", t.Status.Conditions)
			g.Expect(underReplicated(ctx)).To(BeEmpty())
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		l := startLoad(ctx, ledgerTopic, "volume")

		nc := clusterObject()
		victim := int32(1)
		if nc.Status.Leader == naming.NodeID(nc, victim) {
			victim = 2 // the loss under test is a broker's data, not a Raft election
		}
		podName, claimName := naming.PodName(nc, victim), naming.PVC(nc, victim)
		var pod corev1.Pod
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: podName}, &pod)).To(Succeed())
		var claim corev1.PersistentVolumeClaim
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: claimName}, &claim)).To(Succeed())
		var pv corev1.PersistentVolume
		Expect(k8s.Get(ctx, types.NamespacedName{Name: claim.Spec.VolumeName}, &pv)).To(Succeed())
		Expect(pv.Spec.Local).NotTo(BeNil(), "volume %s is not a local volume", pv.Name)

		By("destroying " + podName + "'s volume: its claim deleted, the broker killed, the directory emptied")
		lost := time.Now()
		_, err := kubectl("", "-n", suiteNS, "delete", "pvc", claimName, "--wait=false")
		Expect(err).NotTo(HaveOccurred())
		id, _ := brokerContainer(&pod)
		Expect(id).NotTo(BeEmpty(), "no running broker container in %s", podName)
		Expect(killContainer(ctx, id)).To(Succeed())
		Expect(emptyDir(pv.Spec.Local.Path)).To(Succeed())

		By("the operator reports the loss and recreates the claim and the pod")
		Eventually(ctx, func() []string { return clusterEvents(ctx) }).WithTimeout(2 * time.Minute).
			Should(ContainElements("VolumeLost", "RecreatingVolume"))
		Eventually(ctx, func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: podName}, &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(pod.UID), "pod recreated")
			g.Expect(podReady(&p)).To(BeTrue(), "pod Ready")
			var c corev1.PersistentVolumeClaim
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: claimName}, &c)).To(Succeed())
			g.Expect(c.UID).NotTo(Equal(claim.UID), "claim recreated")
			g.Expect(c.Spec.VolumeName).NotTo(Equal(pv.Name), "a fresh volume")
			g.Expect(underReplicated(ctx)).To(BeEmpty())
			cur := clusterObject()
			g.Expect(cur.Status.VolumeLoss).To(BeEmpty())
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionVolumeLost)).To(BeTrue(), "VolumeLost False")
			g.Expect(clusterEvents(ctx)).To(ContainElement("VolumeRecovered"))
			clusterReady(g, ctx)
		}).WithTimeout(5 * time.Minute).Should(Succeed())
		recovered := time.Now()
		AddReportEntry("fresh volume, pod Ready and every ledger partition in sync after", recovered.Sub(lost).Round(time.Second))
		ps, err := svc.Client.AllClusterPartitions(ctx, false)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range ps {
			if p.Topic == ledgerTopic {
				Expect(p.ISR).To(ContainElement(podName), "partition %d: %+v", p.Partition, p)
			}
		}

		Expect(l.history.AcceptedBetween(ledgerTopic, lost, recovered)).NotTo(BeEmpty(), "no message accepted during the loss")
		l.waitAccepted(ctx, 50)
		l.accountFor(ctx, ledgerTopic)

		// Three copies have no room on two brokers (the scale spec): the topic goes.
		_, err = kubectl("", "-n", suiteNS, "delete", "topic", ledgerTopic, "--wait=true", "--timeout=2m")
		Expect(err).NotTo(HaveOccurred())
		Expect(recycleVolumes(ctx)).To(Succeed())
	}, NodeTimeout(12*time.Minute))
}

// underReplicated lists the partitions the brokers report short of their copies in sync or
// without a leader, as "topic/partition isr=[…]".
func underReplicated(ctx context.Context) ([]string, error) {
	ps, err := svc.Client.AllClusterPartitions(ctx, true)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%d isr=%v", p.Topic, p.Partition, p.ISR))
	}
	return out, nil
}

// clusterEvents lists the reasons of the events about the suite's NaradCluster.
func clusterEvents(ctx context.Context) []string {
	var l eventsv1.EventList
	if err := k8s.List(ctx, &l, ctrlclient.InNamespace(suiteNS)); err != nil {
		return nil
	}
	var out []string
	for _, e := range l.Items {
		if e.Regarding.Kind == "NaradCluster" && e.Regarding.Name == ncKey.Name {
			out = append(out, e.Reason)
		}
	}
	return out
}
