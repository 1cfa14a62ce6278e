package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// rollImage is the broker image under a second tag: the same content, so a change of
// spec.image to it restarts every broker onto a "new" image without a second build.
var rollImage = brokerImage + "-roll"

// describeImageRoll: a changed image rolls the brokers one at a time under traffic.
func describeImageRoll() {
	It("rolls every broker onto a changed image one pod at a time, accepting traffic throughout, losing nothing", func(ctx SpecContext) {
		Expect(tagImage(ctx, brokerImage, rollImage)).To(Succeed())
		before := brokerPods(ctx)
		Expect(before).To(HaveLen(3))
		l := startLoad(ctx, topicName, "roll")

		began := time.Now()
		patch := fmt.Sprintf(`{"spec":{"image":%q}}`, rollImage)
		_, err := kubectl("", "-n", suiteNS, "patch", "naradcluster", ncKey.Name, "--type=merge", "-p", patch)
		Expect(err).NotTo(HaveOccurred())

		// Sampled until every broker runs the new image and is Ready: how many were being
		// replaced at once (gone, terminating, or a new pod not Ready yet since it started),
		// and the order they went in. A replacement is done once its new pod was first seen
		// Ready on the new image: a later readiness drop of that pod (while a peer restarts,
		// its metadata leader may change) is counted apart, as a flap, not as a second
		// replacement; the same pod object must stay, or it is being replaced again.
		var most int
		var order []string
		done := map[string]types.UID{} // name → the new pod first seen Ready
		flaps := map[string]int{}
		Eventually(ctx, func(g Gomega) {
			pods := brokerPods(ctx)
			replacing := 0
			for name, old := range before {
				p, ok := pods[name]
				if d, was := done[name]; was && ok && p.UID == d && p.DeletionTimestamp == nil {
					if !podReady(p) {
						flaps[name]++
					}
					continue
				}
				delete(done, name)
				switch {
				case !ok || p.DeletionTimestamp != nil:
					replacing++
				case p.UID != old.UID && brokerImageOf(p) == rollImage && podReady(p):
					done[name] = p.UID
				case p.UID != old.UID:
					replacing++
				}
				if (!ok || p.UID != old.UID || p.DeletionTimestamp != nil) && !slices.Contains(order, name) {
					order = append(order, name)
				}
			}
			most = max(most, replacing)
			ready := 0
			for _, p := range pods {
				if d, was := done[p.Name]; was && p.UID == d && podReady(p) {
					ready++
				}
			}
			g.Expect(ready).To(Equal(len(before)), "brokers on %s and Ready (went: %v)", rollImage, order)
		}).WithTimeout(10 * time.Minute).Should(Succeed())
		AddReportEntry("rolled onto the new image after", time.Since(began).Round(time.Second))
		AddReportEntry("restart order", order)
		AddReportEntry("samples a replaced broker was not Ready in", flaps)
		Expect(most).To(Equal(1), "brokers being replaced at the same time")
		Eventually(ctx, clusterReady).WithTimeout(3 * time.Minute).Should(Succeed())

		rolling := l.history.AcceptedBetween(topicName, began, time.Now())
		AddReportEntry("202s during the roll", len(rolling))
		Expect(len(rolling)).To(BeNumerically(">=", 50), "traffic accepted while the brokers rolled")
		l.waitAccepted(ctx, 50)
		l.accountFor(ctx, topicName)
	}, NodeTimeout(15*time.Minute))
}

// brokerPods are the NaradCluster's pods by name.
func brokerPods(ctx context.Context) map[string]*corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, ctrlclient.InNamespace(suiteNS))).To(Succeed())
	nc := clusterObject()
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, ok := naming.Ordinal(nc, p.Name); ok {
			out[p.Name] = p
		}
	}
	return out
}

// brokerImageOf is the image of p's broker container.
func brokerImageOf(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == naming.ContainerName {
			return c.Image
		}
	}
	return ""
}

// tagImage gives the image a second name in the cluster's containerd (no registry: the way
// hack/kube/images.sh loads the images).
func tagImage(ctx context.Context, from, to string) error {
	_, err := ctr(ctx, "images", "tag", "--force", from, to)
	return err
}

// clusterObject is the suite's NaradCluster as the API server has it now.
func clusterObject() *naradv1.NaradCluster {
	GinkgoHelper()
	var nc naradv1.NaradCluster
	Expect(k8s.Get(context.Background(), ncKey, &nc)).To(Succeed())
	return &nc
}
