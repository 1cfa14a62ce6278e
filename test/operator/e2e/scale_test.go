package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
	"narad.dev/test/harness"
)

// Broker flags for test-speed failure detection and move timeouts (all listed by
// `narad serve --help`).
var brokerArgs = []string{
	"--heartbeat-interval=1s", "--heartbeat-timeout=6s",
	"--move-dead-target-abort-after=20s", "--move-force-promote-after=20s",
}

const (
	topicOrders = "orders"
	topicEvents = "events"
	topicAudit  = "orders-audit" // the FanoutLink's child of orders
	partitions  = 6
	// preloadMiBPerPartition is the data put in each events partition before the scale-up.
	preloadMiBPerPartition = 4
)

var _ = Describe("A NaradCluster scaled by the operator, with real brokers under traffic", Ordered, func() {
	var (
		nc       *naradv1.NaradCluster
		eps      *endpoints
		tl       *timeline
		load     *traffic
		ctx      context.Context
		cancel   context.CancelFunc
		ncKey    types.NamespacedName
		stsKey   types.NamespacedName
		scaledAt time.Time
	)

	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		size := resource.MustParse("1Gi")
		nc = &naradv1.NaradCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "orbit", Namespace: ns.Name},
			Spec: naradv1.NaradClusterSpec{
				Replicas: 4, InitialClusterSize: 3,
				Storage: naradv1.StorageSpec{Size: &size, PVCRetentionOnScaleDown: naradv1.PVCRetentionDelete},
				Broker:  naradv1.BrokerConfig{ExtraArgs: brokerArgs},
				// This suite proves scaling with single-copy partitions (moves); a cluster of
				// four would otherwise replicate new topics three times.
				TopicDefaults: naradv1.TopicDefaults{ReplicationFactor: new(int32(1))},
			},
		}
		ncKey = types.NamespacedName{Namespace: ns.Name, Name: nc.Name}
		stsKey = types.NamespacedName{Namespace: ns.Name, Name: naming.StatefulSet(nc)}
	})

	AfterAll(func() {
		if load != nil {
			load.StopProducing()
			load.StopConsuming()
		}
		if tl != nil {
			tl.Stop()
		}
		if eps != nil {
			eps.Stop()
		}
		cancel()
	})

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			dumpCluster(nc, tl, load)
		}
	})

	It("brings up a cluster of 4 with its topics and fan-out link", func() {
		Expect(k8s.Create(ctx, nc)).To(Succeed())
		for _, name := range []string{topicOrders, topicEvents} {
			Expect(k8s.Create(ctx, &naradv1.Topic{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nc.Namespace},
				Spec:       naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name}, Name: name, Partitions: partitions},
			})).To(Succeed())
		}
		childParts := int32(partitions)
		Expect(k8s.Create(ctx, &naradv1.FanoutLink{
			ObjectMeta: metav1.ObjectMeta{Name: topicAudit, Namespace: nc.Namespace},
			Spec: naradv1.FanoutLinkSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name},
				Parent: topicOrders, Child: topicAudit, CreateChild: true, ChildPartitions: &childParts},
		})).To(Succeed())

		Eventually(func(g Gomega) {
			cur := getCluster(g, ncKey)
			g.Expect(cur.Status.ReadyReplicas).To(BeEquivalentTo(4))
			g.Expect(cur.Status.Members).To(HaveLen(4))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "Ready")
		}).WithTimeout(120 * time.Second).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, name := range []string{topicOrders, topicEvents} {
				var t naradv1.Topic
				g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: name}, &t)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "topic %s Ready", name)
			}
			var l naradv1.FanoutLink
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: topicAudit}, &l)).To(Succeed())
			g.Expect(l.Status.State).To(Equal(naradv1.FanoutLinkAttached))
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
	})

	It("serves continuous produce and consume through the live pods", func() {
		eps = startEndpoints(nc)
		Eventually(eps.Live).WithTimeout(10 * time.Second).Should(HaveLen(4))
		tl = startTimeline(nc, eps)
		load = startTraffic(eps, []string{topicOrders, topicEvents}, []string{topicAudit})
		Eventually(func(g Gomega) {
			g.Expect(load.produced.Load()).To(BeNumerically(">=", 200), load.String())
			g.Expect(load.consumed.Load()).To(BeNumerically(">=", 100), load.String())
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("scales 4 → 3 by decommissioning node 3 first, losing no accepted message", func() {
		node3 := naming.NodeID(nc, 3)
		scaledAt = time.Now()
		setReplicas(ctx, ncKey, 3)

		Eventually(func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, stsKey, &sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(3))
			var pod corev1.Pod
			err := k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: naming.PodName(nc, 3)}, &pod)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s still exists (%v)", naming.PodName(nc, 3), err)
			var pvc corev1.PersistentVolumeClaim
			err = k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: naming.PVC(nc, 3)}, &pvc)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "PVC %s still exists (%v)", naming.PVC(nc, 3), err)
			cur := getCluster(g, ncKey)
			g.Expect(cur.Status.ReadyReplicas).To(BeEquivalentTo(3))
			// The brokers keep a removed node's record (dead, out of Raft, owning nothing) until
			// their member GC collects it an hour later; the status shows it as such.
			for _, m := range cur.Status.Members {
				if m.NodeID == node3 {
					g.Expect(m.RaftRole).To(Equal("none"), "removed node in status: %+v", m)
					g.Expect(m.OwnedPartitions).To(BeZero(), "removed node in status: %+v", m)
				} else {
					g.Expect(m.Status).To(Equal(client.StatusAlive), "member %+v", m)
				}
			}
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionDraining)).To(BeTrue(), "Draining False")
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionDegraded)).To(BeTrue(), "Degraded False")
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "Ready")
		}).WithTimeout(150 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("the order: draining, then owning nothing and out of Raft, and only then the StatefulSet shrank")
		tl.sync()
		ss := tl.since(scaledAt)
		history := describe(ss, node3)
		draining := firstIndex(ss, func(s sample) bool { return s.Members[node3].Draining })
		drained := firstIndex(ss, func(s sample) bool {
			m, ok := s.Members[node3]
			return ok && m.Draining && m.OwnedPartitions == 0 && m.RaftRole == "none"
		})
		shrunk := firstIndex(ss, func(s sample) bool { return s.StsReplicas == 3 })
		Expect(draining).To(BeNumerically(">=", 0), "never saw %s draining:\n%s", node3, history)
		Expect(drained).To(BeNumerically(">=", draining), "never saw %s own nothing and leave Raft:\n%s", node3, history)
		Expect(shrunk).To(BeNumerically(">=", drained), "the StatefulSet shrank before %s was drained:\n%s", node3, history)
		Expect(ss[draining].Members[node3].OwnedPartitions).To(BeNumerically(">", 0), "%s owned partitions to move:\n%s", node3, history)
		for _, s := range ss[:shrunk] {
			Expect(s.StsReplicas).To(BeEquivalentTo(4), "the StatefulSet changed before the shrink:\n%s", history)
		}
		Expect(firstIndex(ss, func(s sample) bool { m, ok := statusMember(s, node3); return ok && m.Draining })).
			To(BeNumerically(">=", 0), "the operator's status never showed %s draining:\n%s", node3, history)
		drainingTrue := firstIndex(ss, func(s sample) bool { return condStatus(s, naradv1.ConditionDraining) == metav1.ConditionTrue })
		Expect(drainingTrue).To(BeNumerically(">=", 0), "Draining never True:\n%s", history)
		Expect(firstIndex(ss[drainingTrue:], func(s sample) bool { return condStatus(s, naradv1.ConditionDraining) == metav1.ConditionFalse })).
			To(BeNumerically(">=", 0), "Draining never went back to False:\n%s", history)

		By("its partitions moved to the nodes that stay")
		admin, err := eps.client(ctx, 0)
		Expect(err).NotTo(HaveOccurred())
		for _, topic := range []string{topicOrders, topicEvents, topicAudit} {
			owners, unavailable, err := harness.TopicOwners(ctx, admin, topic)
			Expect(err).NotTo(HaveOccurred())
			Expect(unavailable).To(BeEmpty(), "topic %s", topic)
			Expect(owners).To(HaveLen(partitions))
			for p, o := range owners {
				Expect([]string{naming.NodeID(nc, 0), naming.NodeID(nc, 1), naming.NodeID(nc, 2)}).
					To(ContainElement(o), "topic %s partition %d owner", topic, p)
			}
		}

		By("traffic ran through the scale-down and every 202'd message is consumed, in the child too")
		for _, topic := range []string{topicOrders, topicEvents} {
			Expect(load.history.AcceptedBetween(topic, scaledAt, ss[shrunk].At)).NotTo(BeEmpty(),
				"no %s message accepted while the node drained", topic)
		}
		load.StopProducing()
		Eventually(func(g Gomega) {
			for _, topic := range []string{topicOrders, topicEvents} {
				missing := load.history.Missing(topic)
				g.Expect(missing).To(BeEmpty(), "%d accepted %s messages never consumed (%s)", len(missing), topic, load)
			}
			missing := load.missingInChild(topicOrders)
			g.Expect(missing).To(BeEmpty(), "%d accepted orders messages never consumed from %s", len(missing), topicAudit)
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		load.StopConsuming()
		GinkgoWriter.Printf("traffic: %s; %d orders and %d events accepted\n", load,
			len(load.history.Accepted(topicOrders)), len(load.history.Accepted(topicEvents)))
	})

	It("scales 3 → 5: the new nodes join and the brokers rebalance onto them", func() {
		admin, err := eps.client(ctx, 0)
		Expect(err).NotTo(HaveOccurred())
		// The planner gives up surplus partitions in (topic, partition) order, so the events
		// partitions are among those that move: give them data to copy.
		began := time.Now()
		Expect(preload(ctx, admin, topicEvents, 6*preloadMiBPerPartition)).To(Succeed())
		GinkgoWriter.Printf("preloaded %d MiB into %s in %s\n", 6*preloadMiBPerPartition, topicEvents, time.Since(began))
		scaledAt = time.Now()
		setReplicas(ctx, ncKey, 5)

		By("a destination held up mid-rebalance keeps the moves in flight: the status shows it")
		// Small partitions move in well under a second, faster than the operator's status
		// period, so the first destination to receive a move is paused (SIGSTOP) until the
		// status has shown the rebalance, then resumed.
		var held string
		Eventually(func(g Gomega) {
			moves, err := admin.Moves(ctx, false)
			g.Expect(err).NotTo(HaveOccurred())
			for _, m := range moves {
				if o, ok := naming.Ordinal(nc, m.To); ok && o >= 3 {
					held = m.To
				}
			}
			g.Expect(held).NotTo(BeEmpty(), "no move towards a new node yet")
		}).WithTimeout(90 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(runner.Pause(nc.Namespace, held)).To(Succeed())
		DeferCleanup(func() { _ = runner.Resume(nc.Namespace, held) })
		GinkgoWriter.Printf("%s paused %s with a move in flight towards it\n", time.Now().Format("15:04:05.000"), held)
		Eventually(func(g Gomega) {
			cur := getCluster(g, ncKey)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionRebalancing)).To(BeTrue(), "Rebalancing True")
			g.Expect(cur.Status.Moves.InFlight).To(BeNumerically(">", 0))
		}).WithTimeout(15 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(runner.Resume(nc.Namespace, held)).To(Succeed())

		Eventually(func(g Gomega) {
			cur := getCluster(g, ncKey)
			g.Expect(cur.Status.ReadyReplicas).To(BeEquivalentTo(5))
			g.Expect(cur.Status.Members).To(HaveLen(5))
			ml, err := admin.ClusterMembers(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ml.Members).To(HaveLen(5))
			for _, m := range ml.Members {
				g.Expect(m.Status).To(Equal(client.StatusAlive), "member %s", m.ID)
				g.Expect(m.OwnedPartitions).To(BeNumerically(">", 0), "member %s owns nothing yet", m.ID)
				// The rack init container wrote the pod runner node's zone; the broker read it.
				g.Expect(m.Rack).To(Equal(e2eZone), "member %s rack", m.ID)
			}
			g.Expect(cur.Status.Moves.InFlight).To(BeZero())
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionRebalancing)).To(BeTrue(), "Rebalancing False")
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "Ready")
		}).WithTimeout(150 * time.Second).WithPolling(time.Second).Should(Succeed())

		tl.sync()
		ss := tl.since(scaledAt)
		history := describe(ss, naming.NodeID(nc, 4))
		rebalancing := firstIndex(ss, func(s sample) bool { return condStatus(s, naradv1.ConditionRebalancing) == metav1.ConditionTrue })
		Expect(rebalancing).To(BeNumerically(">=", 0), "Rebalancing never True:\n%s", history)
		Expect(firstIndex(ss[rebalancing:], func(s sample) bool { return condStatus(s, naradv1.ConditionRebalancing) == metav1.ConditionFalse })).
			To(BeNumerically(">=", 0), "Rebalancing never back to False:\n%s", history)
	})

	It("rolls every pod one at a time, highest ordinal first and the Raft leader last, losing no accepted message", func() {
		load = startTraffic(eps, []string{topicOrders}, nil)
		Eventually(load.produced.Load).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 50))
		before := podUIDs(ctx, nc, true)
		Expect(before).To(HaveLen(5))

		// Sample the pods and the leader the operator reports while the roll runs.
		type rollSample struct {
			at      time.Time
			uids    map[string]types.UID
			ready   map[string]types.UID // Ready and not being deleted
			unready int
			leader  string
		}
		var samples []rollSample
		sample := func(g Gomega) rollSample {
			cur := getCluster(g, ncKey)
			all := podUIDs(ctx, nc, true)
			ready := podUIDs(ctx, nc, false)
			return rollSample{at: time.Now(), uids: all, ready: ready, unready: 5 - len(ready), leader: cur.Status.Leader}
		}
		rolledAt := time.Now().UTC().Format(time.RFC3339Nano)
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, naming.RestartedAtAnnotation, rolledAt))
		var obj naradv1.NaradCluster
		obj.Namespace, obj.Name = ncKey.Namespace, ncKey.Name
		Expect(k8s.Patch(ctx, &obj, ctrlclient.RawPatch(types.MergePatchType, patch))).To(Succeed())

		replaced := func(s rollSample, pod string) bool { u, ok := s.uids[pod]; return ok && u != before[pod] }
		Eventually(func(g Gomega) {
			s := sample(g)
			samples = append(samples, s)
			for pod := range before {
				g.Expect(replaced(s, pod)).To(BeTrue(), "pod %s not restarted yet", pod)
			}
			g.Expect(s.unready).To(BeZero(), "a restarted pod is not Ready yet")
		}).WithTimeout(240 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("never more than one pod being replaced at a time")
		// A pod is being replaced from its deletion (old UID, no longer Ready) until its new
		// incarnation is Ready. Another broker may blink unready for a moment while the
		// cluster settles (a leader change); that is not the operator's doing and not counted.
		readyLater := func(from int, pod string, old types.UID) bool {
			for _, later := range samples[from+1:] {
				if u, ok := later.ready[pod]; ok && u == old {
					return true
				}
			}
			return false
		}
		for i, s := range samples {
			var replacing []string
			for pod, old := range before {
				u, exists := s.uids[pod]
				_, ready := s.ready[pod]
				switch {
				case !exists, u != old && !ready: // deleted, or recreated and not Ready yet
					replacing = append(replacing, pod)
				case u == old && !ready && !readyLater(i, pod, old):
					replacing = append(replacing, pod) // terminating: never Ready again under this UID
				}
			}
			Expect(len(replacing)).To(BeNumerically("<=", 1), "pods being replaced together at %s: %v", s.at.Format("15:04:05.000"), replacing)
		}

		By("the order: highest ordinal first, the Raft leader last")
		var order []string
		leaderBefore := map[string]string{} // pod → leader the operator last reported before it went
		for i, s := range samples {
			for pod := range before {
				if slices.Contains(order, pod) {
					continue
				}
				if u, ok := s.uids[pod]; !ok || u != before[pod] {
					order = append(order, pod)
					// The leader last reported before it went: status.leader is empty while
					// the operator cannot read it (a sample taken then says nothing).
					for j := i - 1; j >= 0; j-- {
						if samples[j].leader != "" {
							leaderBefore[pod] = samples[j].leader
							break
						}
					}
				}
			}
		}
		Expect(order).To(HaveLen(5), "restart order %v", order)
		last := order[len(order)-1]
		Expect(leaderBefore[last]).To(Equal(last), "the last pod restarted (%s) was not the Raft leader; order %v", last, order)
		var followers []int32
		for _, pod := range order[:len(order)-1] {
			o, ok := naming.Ordinal(nc, pod)
			Expect(ok).To(BeTrue())
			followers = append(followers, o)
		}
		Expect(slices.IsSortedFunc(followers, func(a, b int32) int { return int(b - a) })).To(BeTrue(),
			"followers not restarted highest ordinal first: %v", order)

		By("every 202'd message is consumed")
		load.StopProducing()
		Eventually(func(g Gomega) {
			missing := load.history.Missing(topicOrders)
			g.Expect(missing).To(BeEmpty(), "%d accepted orders messages never consumed (%s)", len(missing), load)
		}).WithTimeout(60 * time.Second).WithPolling(time.Second).Should(Succeed())
		load.StopConsuming()
	})

	It("scales 5 → 2 down to the voters, then refuses what would break quorum, keeping everything running, Degraded", func() {
		// Nodes 4 and 3 joined as non-voters and may go, highest first; node 2 is one of the
		// three voters and the brokers refuse to leave fewer than three (min_voters). The
		// scale-down stops there with the StatefulSet at 3.
		scaledAt = time.Now()
		setReplicas(ctx, ncKey, 2)
		var refused *metav1.Condition
		Eventually(func(g Gomega) {
			cur := getCluster(g, ncKey)
			refused = meta.FindStatusCondition(cur.Status.Conditions, naradv1.ConditionDegraded)
			g.Expect(refused).NotTo(BeNil())
			g.Expect(refused.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(refused.Reason).To(Equal("ScaleDownRefused"))
			g.Expect(refused.ObservedGeneration).To(Equal(cur.Generation))
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, naradv1.ConditionDraining)).To(BeTrue(), "Draining False")
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, stsKey, &sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(3))
			g.Expect(podUIDs(ctx, nc, true)).To(HaveLen(3), "pods 3 and 4 gone")
		}).WithTimeout(150 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(refused.Message).To(ContainSubstring("min_voters"))
		Expect(refused.Message).To(ContainSubstring(naming.NodeID(nc, 2)))

		By("the highest ordinal drained first")
		tl.sync()
		ss := tl.since(scaledAt)
		for _, o := range []int32{4, 3} {
			id := naming.NodeID(nc, o)
			Expect(firstIndex(ss, func(s sample) bool { m, ok := s.Members[id]; return ok && m.RaftRole == "none" })).
				To(BeNumerically(">=", 0), "%s never left Raft:\n%s", id, describe(ss, id))
		}
		left4 := firstIndex(ss, func(s sample) bool { return s.Members[naming.NodeID(nc, 4)].RaftRole == "none" })
		drain3 := firstIndex(ss, func(s sample) bool { return s.Members[naming.NodeID(nc, 3)].Draining })
		Expect(drain3).To(BeNumerically(">=", left4), "orbit-3 drained before orbit-4 had left:\n%s%s",
			describe(ss, naming.NodeID(nc, 4)), describe(ss, naming.NodeID(nc, 3)))

		By("nothing more is removed: the StatefulSet, the pods and the voters stay")
		pods := podUIDs(ctx, nc, false)
		Expect(pods).To(HaveLen(3))
		admin, err := eps.client(ctx, 0)
		Expect(err).NotTo(HaveOccurred())
		stay := []string{naming.NodeID(nc, 0), naming.NodeID(nc, 1), naming.NodeID(nc, 2)}
		Consistently(func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, stsKey, &sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(3))
			g.Expect(podUIDs(ctx, nc, false)).To(Equal(pods), "no pod deleted or restarted")
			cur := getCluster(g, ncKey)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, naradv1.ConditionDegraded)).To(BeTrue())
			g.Expect(cur.Status.ReadyReplicas).To(BeEquivalentTo(3))
			ml, err := admin.ClusterMembers(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			byID := map[string]client.Member{}
			for _, m := range ml.Members {
				byID[m.ID] = m
			}
			for _, id := range stay {
				g.Expect(byID).To(HaveKey(id))
				g.Expect(byID[id].Status).To(Equal(client.StatusAlive), "member %s", id)
				g.Expect(byID[id].Draining).To(BeFalse(), "member %s draining after the refusal", id)
				g.Expect(byID[id].RaftRole).To(Equal("voter"), "member %s", id)
			}
		}).WithTimeout(6 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(admin.Produce(ctx, topicEvents, []byte("after-refusal"), client.ProduceOptions{})).To(Succeed())
	})
})

func getCluster(g Gomega, key types.NamespacedName) *naradv1.NaradCluster {
	var nc naradv1.NaradCluster
	g.Expect(k8s.Get(context.Background(), key, &nc)).To(Succeed())
	return &nc
}

func setReplicas(ctx context.Context, key types.NamespacedName, n int32) {
	GinkgoHelper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	var nc naradv1.NaradCluster
	nc.Namespace, nc.Name = key.Namespace, key.Name
	Expect(k8s.Patch(ctx, &nc, ctrlclient.RawPatch(types.MergePatchType, patch))).To(Succeed())
	GinkgoWriter.Printf("%s spec.replicas → %d (generation %d)\n", time.Now().Format("15:04:05.000"), n, nc.Generation)
}

// podUIDs maps each pod of the cluster to its UID: every pod object with all, else only those
// Ready and not being deleted.
func podUIDs(ctx context.Context, nc *naradv1.NaradCluster, all bool) map[string]types.UID {
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, ctrlclient.InNamespace(nc.Namespace), ctrlclient.MatchingLabels(naming.Selector(nc)))).To(Succeed())
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		if all || (p.DeletionTimestamp == nil && podReady(&p)) {
			out[p.Name] = p.UID
		}
	}
	return out
}
