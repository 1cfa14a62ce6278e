package cluster

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

// missingPod waits until exactly one of want is gone and returns it; it fails if two go.
func missingPod(nc *naradv1.NaradCluster, want []string) string {
	GinkgoHelper()
	var gone []string
	Eventually(func() []string {
		have := podNames(nc)
		gone = nil
		for _, w := range want {
			if !slices.Contains(have, w) {
				gone = append(gone, w)
			}
		}
		return gone
	}).ShouldNot(BeEmpty())
	Expect(gone).To(HaveLen(1), "more than one pod deleted at once")
	return gone[0]
}

var _ = Describe("NaradCluster rolling restart", func() {
	It("restarts one pod at a time, highest ordinal first, the Raft leader last", func() {
		nc := testCluster("roll", withFakeAdmin)
		runningCluster(nc, "rev1")
		currentFake().Update(func(c *brokertest.Cluster) {
			c.Leader = "roll-1"
			for i := range c.Members {
				c.Members[i].Leader = c.Members[i].ID == "roll-1"
			}
		})
		Eventually(func() string {
			var got naradv1.NaradCluster
			mustGet(nc.Name, &got)
			return got.Status.Leader
		}).Should(Equal("roll-1"))
		Consistently(func() []string { return podNames(nc) }, 2*statusInterval).Should(HaveLen(3),
			"no pod is restarted while all are on the update revision")

		By("the StatefulSet controller moving to a new revision")
		setUpdateRevision(nc, "rev2")
		all := []string{"roll-0", "roll-1", "roll-2"}
		var order []string
		for range all {
			gone := missingPod(nc, all)
			order = append(order, gone)
			// The last pod's restart leaves nothing outdated: the cluster is then waiting for it.
			Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionProgressing) }).Should(Or(
				haveCondition(metav1.ConditionTrue, ReasonRollingUpdate), haveCondition(metav1.ConditionTrue, ReasonPodsStarting)))

			By("recreating " + gone + " on the new revision, not ready yet")
			o, _ := naming.Ordinal(nc, gone)
			makePod(nc, o, "rev2", false)
			Consistently(func() []string { return podNames(nc) }, 3*time.Second).Should(HaveLen(3),
				"the next pod must wait until the recreated one is Ready")
			setPodReady(nc, o, true)
		}
		Expect(order).To(Equal([]string{"roll-2", "roll-0", "roll-1"}))
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionProgressing) }).Should(
			haveCondition(metav1.ConditionFalse, ReasonSettled))
		Consistently(func() []string { return podNames(nc) }, 2*statusInterval).Should(HaveLen(3))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElements("RollingRestart", "PodRestarted"))
	})

	It("restarts nothing while the brokers report no leader", func() {
		nc := testCluster("noleader", withFakeAdmin)
		runningCluster(nc, "rev1")
		currentFake().Update(func(c *brokertest.Cluster) { c.Leader = "" })
		setUpdateRevision(nc, "rev2")
		Eventually(func() string {
			return conditionMessage(nc.Name, naradv1.ConditionProgressing)
		}).Should(ContainSubstring("no Raft leader"))
		Consistently(func() []string { return podNames(nc) }, 3*statusInterval).Should(HaveLen(3))

		By("a leader appearing")
		currentFake().Update(func(c *brokertest.Cluster) { c.Leader = "noleader-0" })
		Expect(missingPod(nc, []string{"noleader-0", "noleader-1", "noleader-2"})).To(Equal("noleader-2"))
	})
})
