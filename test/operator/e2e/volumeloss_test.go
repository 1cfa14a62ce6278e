package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

const topicLedger = "ledger" // R = 3, M = 2

var _ = Describe("A broker's volume lost under traffic, with onVolumeLoss Recreate", Ordered, func() {
	var (
		nc     *naradv1.NaradCluster
		eps    *endpoints
		load   *traffic
		ctx    context.Context
		cancel context.CancelFunc
		ncKey  types.NamespacedName
	)

	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-vl-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		size := resource.MustParse("1Gi")
		nc = &naradv1.NaradCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "vault", Namespace: ns.Name},
			Spec: naradv1.NaradClusterSpec{
				Replicas: 3, InitialClusterSize: 3,
				Storage: naradv1.StorageSpec{Size: &size, OnVolumeLoss: naradv1.VolumeLossRecreate},
				Broker:  naradv1.BrokerConfig{ExtraArgs: brokerArgs},
			},
		}
		ncKey = types.NamespacedName{Namespace: ns.Name, Name: nc.Name}
	})

	AfterAll(func() {
		if load != nil {
			load.StopProducing()
			load.StopConsuming()
		}
		if eps != nil {
			eps.Stop()
		}
		cancel()
	})

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			dumpCluster(nc, nil, load)
		}
	})

	It("runs an R = 3, M = 2 topic under produce and consume traffic", func() {
		Expect(k8s.Create(ctx, nc)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := getCluster(g, ncKey)
			g.Expect(cur.Status.ReadyReplicas).To(BeEquivalentTo(3))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "Ready")
		}).WithTimeout(120 * time.Second).WithPolling(time.Second).Should(Succeed())
		eps = startEndpoints(nc)
		Eventually(eps.Live).WithTimeout(10 * time.Second).Should(HaveLen(3))
		admin, err := eps.client(ctx, 0)
		Expect(err).NotTo(HaveOccurred())
		_, err = admin.CreateTopic(ctx, client.CreateTopicRequest{Name: topicLedger, Partitions: 3, ReplicationFactor: 3, MinInsyncReplicas: 2})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) { g.Expect(underReplicated(ctx, admin)).To(BeEmpty()) }).
			WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		load = startTraffic(eps, []string{topicLedger}, nil)
		Eventually(func(g Gomega) {
			g.Expect(load.produced.Load()).To(BeNumerically(">=", 100), load.String())
			g.Expect(load.consumed.Load()).To(BeNumerically(">=", 50), load.String())
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("gives the broker a fresh volume and pod, and the brokers bring it back to a full ISR, losing nothing", func() {
		cur := getClusterNow(ncKey)
		victim := int32(2)
		if cur.Status.Leader == naming.NodeID(nc, victim) {
			victim = 1 // keep the Raft leader: the loss under test is a broker's data, not an election
		}
		pod, claim := naming.PodName(nc, victim), naming.PVC(nc, victim)
		var oldPod corev1.Pod
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: pod}, &oldPod)).To(Succeed())
		var oldClaim corev1.PersistentVolumeClaim
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: claim}, &oldClaim)).To(Succeed())
		admin, err := eps.client(ctx, 0) // ordinal 0 is never the victim
		Expect(err).NotTo(HaveOccurred())

		lostAt := time.Now()
		Expect(runner.LoseVolume(ctx, nc.Namespace, pod, claim)).To(Succeed())
		GinkgoWriter.Printf("%s lost the volume of %s (%s)\n", lostAt.Format("15:04:05.000"), pod, claim)

		By("the operator reports the loss and recreates the claim and the pod")
		Eventually(func(g Gomega) {
			g.Expect(clusterEvents(ctx, nc)).To(ContainElements("VolumeLost", "RecreatingVolume"))
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("the fresh pod runs, and every partition is back to its three in-sync replicas")
		var recoveredAt time.Time
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: pod}, &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(oldPod.UID), "pod recreated")
			g.Expect(podReady(&p)).To(BeTrue(), "pod ready")
			var c corev1.PersistentVolumeClaim
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: claim}, &c)).To(Succeed())
			g.Expect(c.UID).NotTo(Equal(oldClaim.UID), "claim recreated")
			g.Expect(underReplicated(ctx, admin)).To(BeEmpty())
			cur := getCluster(g, ncKey)
			g.Expect(cur.Status.VolumeLoss).To(BeEmpty())
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionVolumeLost)).To(BeTrue(), "VolumeLost False")
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "Ready")
			g.Expect(clusterEvents(ctx, nc)).To(ContainElement("VolumeRecovered"))
			recoveredAt = time.Now()
		}).WithTimeout(120 * time.Second).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("%s back to a full ISR, %s after the loss\n", recoveredAt.Format("15:04:05.000"), recoveredAt.Sub(lostAt).Round(time.Millisecond))
		ps, err := admin.AllClusterPartitions(ctx, false)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range ps {
			if p.Topic == topicLedger {
				Expect(p.ISR).To(ContainElement(naming.NodeID(nc, victim)), "partition %d: %+v", p.Partition, p)
			}
		}

		By("traffic went on through the loss and every 202'd message is consumed")
		Expect(load.history.AcceptedBetween(topicLedger, lostAt, recoveredAt)).NotTo(BeEmpty(), "no message accepted during the loss")
		load.StopProducing()
		Eventually(func(g Gomega) {
			missing := load.history.Missing(topicLedger)
			g.Expect(missing).To(BeEmpty(), "%d accepted messages never consumed (%s)", len(missing), load)
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		load.StopConsuming()
		rep := load.history.Check()
		GinkgoWriter.Printf("traffic: %s; %d accepted, %d missing, %d duplicate deliveries\n", load, rep.Accepted, len(rep.Missing), rep.Duplicates)
		Expect(rep.Missing).To(BeEmpty())
		Expect(rep.Phantom).To(BeEmpty())
	})
})

// underReplicated lists "topic/partition" of the partitions the brokers report short of R
// in-sync replicas or without a leader.
func underReplicated(ctx context.Context, c *client.Client) ([]string, error) {
	ps, err := c.AllClusterPartitions(ctx, true)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%d isr=%v", p.Topic, p.Partition, p.ISR))
	}
	return out, nil
}

// clusterEvents lists the reasons of the events about nc.
func clusterEvents(ctx context.Context, nc *naradv1.NaradCluster) []string {
	var l eventsv1.EventList
	if err := k8s.List(ctx, &l, ctrlclient.InNamespace(nc.Namespace)); err != nil {
		return nil
	}
	var out []string
	for _, e := range l.Items {
		if e.Regarding.Kind == "NaradCluster" && e.Regarding.Name == nc.Name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func getClusterNow(key types.NamespacedName) *naradv1.NaradCluster {
	GinkgoHelper()
	var nc naradv1.NaradCluster
	Expect(k8s.Get(context.Background(), key, &nc)).To(Succeed())
	return &nc
}
