package kube

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	naradv1 "narad.dev/api/v1alpha1"
)

const childTopic = "orders-audit" // the FanoutLink's child of topicName

// The FanoutLink of the suite: every message of the parent, from the link on, is copied into
// a child topic the link creates.
var fanoutManifest = fmt.Sprintf(`
apiVersion: narad.dev/v1alpha1
kind: FanoutLink
metadata:
  name: %s
spec:
  clusterRef: {name: %s}
  parent: %s
  child: %s
  createChild: true
  childPartitions: 3
`, childTopic, ncKey.Name, topicName, childTopic)

// describeFanout: a FanoutLink applied with kubectl, and the parent's messages in the child.
func describeFanout() {
	It("copies every message of a parent topic into the child of a FanoutLink applied with kubectl", func(ctx SpecContext) {
		applied := time.Now()
		Expect(apply(suiteNS, fanoutManifest)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			var l naradv1.FanoutLink
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: childTopic}, &l)).To(Succeed())
			g.Expect(l.Status.State).To(Equal(naradv1.FanoutLinkAttached), "%+v", l.Status)
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		AddReportEntry("FanoutLink attached after", time.Since(applied).Round(time.Second))
		detail, err := svc.Client.GetTopic(ctx, childTopic, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(detail.Partitions).To(Equal(3))

		l := startLoad(ctx, topicName, "fanout")
		l.waitAccepted(ctx, 150)
		l.accountFor(ctx, childTopic)
		// The parent keeps its own messages: the copy is not a move.
		l.accountFor(ctx, topicName)
	}, NodeTimeout(8*time.Minute))
}
