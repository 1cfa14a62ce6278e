package cluster

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

// replicated is one partition of an R = 3, M = 2 topic led by its preferred leader with the
// given ISR.
func replicated(nc *naradv1.NaradCluster, partition int, isr ...int32) client.PartitionReplicas {
	p := client.PartitionReplicas{Topic: "orders", Partition: partition, ReplicationFactor: 3, MinInsyncReplicas: 2,
		Leader: naming.NodeID(nc, 0), LeaderEpoch: 1}
	for o := range int32(3) {
		p.Replicas = append(p.Replicas, naming.NodeID(nc, o))
	}
	for _, o := range isr {
		p.ISR = append(p.ISR, naming.NodeID(nc, o))
	}
	p.UnderReplicated = len(p.ISR) < 3
	p.UnderMinISR = len(p.ISR) < 2
	return p
}

// single is a partition of an R = 1 topic owned by ordinal o.
func single(nc *naradv1.NaradCluster, partition int, o int32) client.PartitionReplicas {
	id := naming.NodeID(nc, o)
	return client.PartitionReplicas{Topic: "logs", Partition: partition, ReplicationFactor: 1, MinInsyncReplicas: 1,
		Leader: id, Replicas: []string{id}, ISR: []string{id}}
}

func setPartitions(ps ...client.PartitionReplicas) {
	currentFake().Update(func(c *brokertest.Cluster) { c.Partitions = append([]client.PartitionReplicas{}, ps...) })
}

// pdbMaxUnavailable is the maxUnavailable of nc's PodDisruptionBudget (-1 while it is absent).
func pdbMaxUnavailable(nc *naradv1.NaradCluster) int {
	var pdb policyv1.PodDisruptionBudget
	if isAbsent(naming.PodDisruptionBudget(nc), &pdb) || pdb.Spec.MaxUnavailable == nil {
		return -1
	}
	return pdb.Spec.MaxUnavailable.IntValue()
}

var _ = Describe("NaradCluster PodDisruptionBudget with replicated partitions", func() {
	It("allows no disruption while a partition has no in-sync replica to spare, one broker at a time otherwise", func() {
		nc := testCluster("pdb", withFakeAdmin)
		runningCluster(nc, "rev1")
		setPartitions(replicated(nc, 0, 0, 1, 2), single(nc, 0, 1))
		Eventually(func() int { return pdbMaxUnavailable(nc) }).Should(Equal(1))
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionDisruptionsBlocked) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonReplicasToSpare))

		By("a follower falling out of the ISR: one more broker down would stop produce")
		setPartitions(replicated(nc, 0, 0, 1), single(nc, 0, 1))
		Eventually(func() int { return pdbMaxUnavailable(nc) }).Should(Equal(0))
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionDisruptionsBlocked) }).Should(
			haveCondition(metav1.ConditionTrue, ReasonPartitionsAtMinISR))
		Expect(conditionMessage(nc.Name, naradv1.ConditionDisruptionsBlocked)).To(
			ContainSubstring("orders/0 (2 of 3 in sync, min 2)"))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("DisruptionsBlocked"))

		By("the brokers not answering: the budget stays closed")
		currentFake().Update(func(c *brokertest.Cluster) { c.NotReady = true })
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionDisruptionsBlocked) }).Should(
			haveCondition(metav1.ConditionTrue, ReasonPartitionsUnknown))
		Consistently(func() int { return pdbMaxUnavailable(nc) }, 2*statusInterval).Should(Equal(0))

		By("the follower back in sync")
		currentFake().Update(func(c *brokertest.Cluster) { c.NotReady = false })
		setPartitions(replicated(nc, 0, 0, 1, 2), single(nc, 0, 1))
		Eventually(func() int { return pdbMaxUnavailable(nc) }).Should(Equal(1))
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionDisruptionsBlocked) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonReplicasToSpare))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("DisruptionsAllowed"))
	})

	It("keeps one broker at a time for single-replica topics and brokers without replication", func() {
		nc := testCluster("pdbone", withFakeAdmin)
		runningCluster(nc, "rev1")
		currentFake().Update(func(c *brokertest.Cluster) { c.NoReplicationAPI = true }) // the partitions list answers 404
		Eventually(func() int { return pdbMaxUnavailable(nc) }).Should(Equal(1))
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionDisruptionsBlocked) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonReplicasToSpare))
		currentFake().Update(func(c *brokertest.Cluster) { c.NoReplicationAPI = false })
		setPartitions(single(nc, 0, 0), single(nc, 1, 1))
		Consistently(func() int { return pdbMaxUnavailable(nc) }, 2*statusInterval).Should(Equal(1))
	})
})

var _ = Describe("NaradCluster rolling restart with replicated partitions", func() {
	It("restarts the next pod only once every partition is back to a full ISR, giving leaders back first", func() {
		nc := testCluster("rollisr", withFakeAdmin)
		runningCluster(nc, "rev1")
		setPartitions(replicated(nc, 0, 0, 1)) // a follower still catching up
		setUpdateRevision(nc, "rev2")
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionProgressing) }).Should(
			ContainSubstring("1 replicated partitions are not back to a full ISR: orders/0 (2 of 3 in sync, min 2)"))
		Consistently(func() []string { return podNames(nc) }, 3*statusInterval).Should(HaveLen(3))

		By("the follower back in sync, its leadership elsewhere than its preferred leader")
		p := replicated(nc, 0, 0, 1, 2)
		p.Leader = naming.NodeID(nc, 1)
		setPartitions(p)
		Expect(missingPod(nc, []string{"rollisr-0", "rollisr-1", "rollisr-2"})).To(Equal("rollisr-2"))
		Expect(slices.ContainsFunc(currentFake().Calls(), func(c brokertest.Call) bool {
			return c.Method == "POST" && c.Path == "/v1/cluster/elect-leaders"
		})).To(BeTrue(), "preferred leaders restored before the restart")

		By("the restarted pod Ready while its replicas catch up: the next one waits")
		setPartitions(replicated(nc, 0, 0, 1))
		makePod(nc, 2, "rev2", true)
		Eventually(func() string { return conditionMessage(nc.Name, naradv1.ConditionProgressing) }).Should(
			ContainSubstring("not back to a full ISR"))
		Consistently(func() []string { return podNames(nc) }, 3*statusInterval).Should(HaveLen(3))
		setPartitions(replicated(nc, 0, 0, 1, 2))
		Expect(missingPod(nc, []string{"rollisr-0", "rollisr-1", "rollisr-2"})).To(Equal("rollisr-1"))
	})
})

// claimPod creates pod ordinal of nc on rev mounting claim (as the StatefulSet controller
// makes it), Ready or with no status yet (not Ready: the operator may act on it at once).
func claimPod(nc *naradv1.NaradCluster, ordinal int32, rev, claim string, ready bool) {
	GinkgoHelper()
	labels := naming.Labels(nc)
	labels[appsv1.ControllerRevisionHashLabelKey] = rev
	// Retried while a just-deleted pod of that name is still visible, as in makePod.
	Eventually(func() error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: naming.PodName(nc, ordinal), Namespace: nc.Namespace, Labels: labels},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: naming.ContainerName, Image: "narad:test"}},
				Volumes: []corev1.Volume{{Name: naming.DataVolume, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			},
		}
		return k8sClient.Create(ctx, p)
	}).Should(Succeed())
	if ready {
		setPodReady(nc, ordinal, true)
	}
}

// makeClaim creates claim name bound to volume (none when "") with finalizers.
func makeClaim(name, volume string, finalizers ...string) *corev1.PersistentVolumeClaim {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: finalizers},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeName:  volume,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
	return pvc
}

// podUID is the UID of pod ordinal of nc ("" when absent).
func podUID(nc *naradv1.NaradCluster, ordinal int32) types.UID {
	var p corev1.Pod
	if isAbsent(naming.PodName(nc, ordinal), &p) {
		return ""
	}
	return p.UID
}

func volumeLoss(name string) []naradv1.LostVolume {
	var nc naradv1.NaradCluster
	mustGet(name, &nc)
	return nc.Status.VolumeLoss
}

const testFinalizer = "test.narad.dev/hold"

var _ = Describe("NaradCluster volume loss", func() {
	It("with onVolumeLoss Wait reports a broker whose claim is being deleted and changes nothing", func() {
		nc := testCluster("vlwait", withFakeAdmin)
		runningCluster(nc, "rev1")
		claim := naming.PVC(nc, 1)
		pvc := makeClaim(claim, "", testFinalizer)
		DeferCleanup(func() {
			mutate(claim, &corev1.PersistentVolumeClaim{}, func(p *corev1.PersistentVolumeClaim) { p.Finalizers = nil })
		})
		By("pod 1 gone with its node, its claim deleted, the pod back and not starting")
		var old corev1.Pod
		mustGet(naming.PodName(nc, 1), &old)
		Expect(k8sClient.Delete(ctx, &old, ctrlclient.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() types.UID { return podUID(nc, 1) }).Should(BeEmpty())
		Expect(k8sClient.Delete(ctx, pvc)).To(Succeed())
		claimPod(nc, 1, "rev1", claim, false)
		uid := podUID(nc, 1)

		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumeLost) }).Should(
			haveCondition(metav1.ConditionTrue, ReasonVolumeLostWaiting))
		Expect(conditionMessage(nc.Name, naradv1.ConditionVolumeLost)).To(And(
			ContainSubstring("vlwait-1: claim data-vlwait-1 is being deleted"), ContainSubstring("onVolumeLoss is Wait")))
		lost := volumeLoss(nc.Name)
		Expect(lost).To(HaveLen(1))
		Expect(lost[0].Pod).To(Equal("vlwait-1"))
		Expect(lost[0].Claim).To(Equal(claim))
		Expect(lost[0].Reason).To(Equal(naradv1.VolumeLossClaimDeleted))
		Expect(lost[0].RecreatedAt).To(BeNil())
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("VolumeLost"))

		By("nothing is deleted or recreated")
		Consistently(func(g Gomega) {
			g.Expect(podUID(nc, 1)).To(Equal(uid))
			var c corev1.PersistentVolumeClaim
			g.Expect(k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: claim}, &c)).To(Succeed())
			g.Expect(c.UID).To(Equal(pvc.UID))
			g.Expect(eventReasons(nc.Name)).NotTo(ContainElement("RecreatingVolume"))
		}, 3*statusInterval).Should(Succeed())

		By("the administrator restoring it: the pod runs again")
		setPodReady(nc, 1, true)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumeLost) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonNoVolumeLost))
		Expect(volumeLoss(nc.Name)).To(BeEmpty())
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("VolumeRecovered"))
	})

	It("with onVolumeLoss Recreate deletes the claim of a local volume whose node is gone, and the pod", func() {
		nc := testCluster("vlnew", withFakeAdmin, func(nc *naradv1.NaradCluster) {
			nc.Spec.Storage.OnVolumeLoss = naradv1.VolumeLossRecreate
		})
		runningCluster(nc, "rev1")
		claim := naming.PVC(nc, 2)
		pvName := "local-" + namespace + "-2"
		pvc := makeClaim(claim, pvName, testFinalizer)
		DeferCleanup(func() {
			mutate(claim, &corev1.PersistentVolumeClaim{}, func(p *corev1.PersistentVolumeClaim) { p.Finalizers = nil })
		})
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/narad"}},
				ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: claim, UID: pvc.UID},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"worker-gone"}}},
				}}}},
			},
		}
		Expect(k8sClient.Create(ctx, pv)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, pv) })

		By("pod 2 recreated by the StatefulSet controller after its node was deleted, Pending")
		var old corev1.Pod
		mustGet(naming.PodName(nc, 2), &old)
		Expect(k8sClient.Delete(ctx, &old, ctrlclient.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() types.UID { return podUID(nc, 2) }).Should(BeEmpty())
		claimPod(nc, 2, "rev1", claim, false)

		By("the operator deletes the claim and the pod")
		Eventually(func(g Gomega) {
			var c corev1.PersistentVolumeClaim
			g.Expect(k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: claim}, &c)).To(Succeed())
			g.Expect(c.DeletionTimestamp).NotTo(BeNil(), "claim deleted")
			g.Expect(podUID(nc, 2)).To(BeEmpty(), "pod deleted")
		}).Should(Succeed())
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumeLost) }).Should(
			haveCondition(metav1.ConditionTrue, ReasonVolumeRecreating))
		lost := volumeLoss(nc.Name)
		Expect(lost).To(HaveLen(1))
		Expect(lost[0].Reason).To(Equal(naradv1.VolumeLossNodeGone))
		Expect(lost[0].Message).To(ContainSubstring("worker-gone"))
		Expect(lost[0].RecreatedAt).NotTo(BeNil())
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElements("VolumeLost", "RecreatingVolume"))

		By("the StatefulSet controller creating a fresh claim and pod, which starts")
		mutate(claim, &corev1.PersistentVolumeClaim{}, func(p *corev1.PersistentVolumeClaim) { p.Finalizers = nil })
		Eventually(func() bool { return isAbsent(claim, &corev1.PersistentVolumeClaim{}) }).Should(BeTrue())
		makeClaim(claim, "")
		claimPod(nc, 2, "rev1", claim, false)
		Consistently(func() types.UID { return podUID(nc, 2) }, 2*statusInterval).ShouldNot(BeEmpty(),
			"a pod on a fresh, unbound claim is starting, not lost")
		setPodReady(nc, 2, true)
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumeLost) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonNoVolumeLost))
		Expect(volumeLoss(nc.Name)).To(BeEmpty())
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("VolumeRecovered"))
	})
})
