package kube

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
	"narad.dev/test/harness"
	"narad.dev/test/kube/chart"
)

const (
	suiteNS    = "narad-kube-suite"
	operatorNS = "narad-system"
	imageTag   = "dev" // hack/kube/lib.sh IMAGE_TAG
	topicName  = "orders"
)

var (
	brokerImage   = "narad.local/narad:" + imageTag
	operatorImage = "narad.local/narad-operator"
	ncKey         = types.NamespacedName{Namespace: suiteNS, Name: "narad"}
)

// The NaradCluster of the suite: three brokers on the local volumes, small requests (three
// brokers and the operator share the node's 2 cores), the image built from the tree.
// New topics get two copies, set rather than defaulted: the default (3 from three replicas
// on) would restart every broker when the scale spec crosses 3, and a cluster of two has no
// receiver for a third copy. --min-voters=1 lets `kubectl narad scale --to 2` remove a voter
// (the brokers keep three voters otherwise). A lost volume is recreated (the volume spec).
var clusterManifest = fmt.Sprintf(`
apiVersion: narad.dev/v1alpha1
kind: NaradCluster
metadata:
  name: %s
spec:
  replicas: 3
  initialClusterSize: 3
  image: %s
  imagePullPolicy: Never
  storage:
    size: 1Gi
    storageClassName: local-path
    pvcRetentionOnScaleDown: Delete
    onVolumeLoss: Recreate
  topicDefaults:
    replicationFactor: 2
  broker:
    extraArgs: ["--min-voters=1"]
  resources:
    requests: {cpu: 50m, memory: 64Mi}
    limits: {memory: 512Mi}
  service:
    type: ClusterIP
`, ncKey.Name, brokerImage)

var topicManifest = fmt.Sprintf(`
apiVersion: narad.dev/v1alpha1
kind: Topic
metadata:
  name: %s
spec:
  clusterRef: {name: %s}
  partitions: 3
`, topicName, ncKey.Name)

// svc is the client Service, reached from this process through its cluster IP (kube-proxy);
// set once the NaradCluster is Ready.
var svc harness.Endpoint

var _ = Describe("A NaradCluster on a real single-node cluster", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		deleteNamespace(ctx, suiteNS)
		Expect(recycleVolumes(ctx)).To(Succeed())
		_, err := kubectl("", "create", "namespace", suiteNS)
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(5*time.Minute))

	AfterAll(func(ctx SpecContext) {
		// The operator stays installed: the NaradCluster's finalizer needs it.
		deleteNamespace(ctx, suiteNS)
		Expect(recycleVolumes(ctx)).To(Succeed())
	}, NodeTimeout(5*time.Minute))

	It("installs the operator with its Helm chart, and the operator becomes available", func(ctx SpecContext) {
		// kube-up rebuilds the image under the same tag: the digest in a pod annotation rolls
		// the operator onto the image just built.
		digest, err := imageDigest(ctx, operatorImage+":"+imageTag)
		Expect(err).NotTo(HaveOccurred())
		rel, err := chart.Apply(ctx, chart.Options{
			Kubeconfig: kubeconfig,
			ChartDir:   root + "/charts/narad-operator",
			Namespace:  operatorNS,
			Release:    "narad-operator",
			Values: map[string]any{
				"image":          map[string]any{"repository": operatorImage, "tag": imageTag, "pullPolicy": "Never"},
				"brokerImage":    brokerImage,
				"podAnnotations": map[string]any{"kube-suite.narad.dev/image": digest},
			},
			Timeout: 4 * time.Minute,
			Logf:    func(f string, a ...any) { GinkgoWriter.Printf("helm: "+f+"\n", a...) },
		})
		Expect(err).NotTo(HaveOccurred())
		var dep appsv1.Deployment
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: rel.Name}, &dep)).To(Succeed())
		Expect(dep.Status.AvailableReplicas).To(BeNumerically(">=", 1))
	}, NodeTimeout(6*time.Minute))

	It("brings a NaradCluster of 3 brokers applied with kubectl to Ready", func(ctx SpecContext) {
		began := time.Now()
		Expect(apply(suiteNS, clusterManifest)).To(Succeed())
		Eventually(ctx, clusterReady).WithTimeout(10 * time.Minute).Should(Succeed())
		AddReportEntry("NaradCluster of 3 Ready after", time.Since(began).Round(time.Second))

		var secret corev1.Secret
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: ncKey.Name + "-security"}, &secret)).To(Succeed())
		var service corev1.Service
		Expect(k8s.Get(ctx, ncKey, &service)).To(Succeed())
		c, err := client.New(fmt.Sprintf("http://%s:7942", service.Spec.ClusterIP),
			client.WithBasicAuth("admin", string(secret.Data[naradv1.AdminPasswordKey])))
		Expect(err).NotTo(HaveOccurred())
		svc = harness.Endpoint{Node: "service", Client: c}
	}, NodeTimeout(11*time.Minute))

	It("creates a Topic applied with kubectl on the brokers", func(ctx SpecContext) {
		Expect(apply(suiteNS, topicManifest)).To(Succeed())
		Eventually(ctx, func(g Gomega) {
			var t naradv1.Topic
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: topicName}, &t)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "%+v", t.Status.Conditions)
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		detail, err := svc.Client.GetTopic(ctx, topicName, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(detail.Partitions).To(Equal(3))
	}, NodeTimeout(4*time.Minute))

	It("accounts for every message that got a 202 through the client Service", func(ctx SpecContext) {
		l := newLoad(ctx, harness.ProducerOptions{Topic: topicName, Prefix: "steady", Workers: 2, PerWorker: 100})
		l.wait()
		Expect(l.accepted()).To(BeNumerically(">=", 190), l.stats.String())
		l.accountFor(ctx, topicName)
	}, NodeTimeout(5*time.Minute))

	It("brings a deleted broker pod back on its own volume while traffic flows, losing nothing", func(ctx SpecContext) {
		l := startLoad(ctx, topicName, "podkill")

		const victim = "narad-1"
		var pod corev1.Pod
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: victim}, &pod)).To(Succeed())
		oldUID := pod.UID
		volume := claimVolume(ctx, "data-"+victim)
		deleted := time.Now()
		_, err := kubectl("", "-n", suiteNS, "delete", "pod", victim, "--wait=false")
		Expect(err).NotTo(HaveOccurred())

		Eventually(ctx, func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: victim}, &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(oldUID))
			g.Expect(podReady(&p)).To(BeTrue())
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		AddReportEntry("deleted pod back and Ready after", time.Since(deleted).Round(time.Second))
		Expect(claimVolume(ctx, "data-"+victim)).To(Equal(volume), "the new pod's claim is bound to the old volume")
		Eventually(ctx, clusterReady).WithTimeout(3 * time.Minute).Should(Succeed())
		AddReportEntry("NaradCluster Ready again after", time.Since(deleted).Round(time.Second))

		l.waitAccepted(ctx, 50)
		l.accountFor(ctx, topicName)
	}, NodeTimeout(8*time.Minute))

	It("restarts a killed broker process in the same pod, losing nothing", func(ctx SpecContext) {
		l := startLoad(ctx, topicName, "prockill")

		const victim = "narad-2"
		var pod corev1.Pod
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: victim}, &pod)).To(Succeed())
		id, restarts := brokerContainer(&pod)
		Expect(id).NotTo(BeEmpty(), "no running broker container in %s", victim)
		killed := time.Now()
		// SIGKILL through containerd, as the OOM killer or a crash would end it: no preStop, no SIGTERM.
		Expect(killContainer(ctx, id)).To(Succeed())

		Eventually(ctx, func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: victim}, &p)).To(Succeed())
			g.Expect(p.UID).To(Equal(pod.UID), "the same pod, not a new one")
			_, n := brokerContainer(&p)
			g.Expect(n).To(BeNumerically(">", restarts))
			g.Expect(podReady(&p)).To(BeTrue())
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		AddReportEntry("killed broker restarted and Ready after", time.Since(killed).Round(time.Second))
		Eventually(ctx, clusterReady).WithTimeout(3 * time.Minute).Should(Succeed())

		l.waitAccepted(ctx, 50)
		l.accountFor(ctx, topicName)
	}, NodeTimeout(8*time.Minute))

	describeFanout()
	describeImageRoll()
	describeVolumeLoss()
	describeScale()
})

// brokerContainer is the containerd ID of pod's broker container (empty when it is not
// running) and its restart count.
func brokerContainer(p *corev1.Pod) (string, int32) {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != naming.ContainerName {
			continue
		}
		id, ok := strings.CutPrefix(c.ContainerID, "containerd://")
		if !ok || c.State.Running == nil {
			return "", c.RestartCount
		}
		return id, c.RestartCount
	}
	return "", 0
}

// killContainer sends SIGKILL to the container's task through the cluster's containerd.
func killContainer(ctx context.Context, id string) error {
	_, err := ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id)
	return err
}

// ctr runs containerd's ctr on the cluster's containerd, in the kubelet's namespace.
func ctr(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address",
		filepath.Join(stateDir, "containerd", "containerd.sock"), "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// imageDigest is the digest under which the cluster's containerd holds ref.
func imageDigest(ctx context.Context, ref string) (string, error) {
	out, err := ctr(ctx, "images", "ls", "name=="+ref)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == ref {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("image %s not in the cluster's containerd: %s", ref, out)
}

// clusterReady: the NaradCluster is Ready for its current generation with 3 ready brokers.
func clusterReady(g Gomega, ctx context.Context) { readyWith(g, ctx, 3) }

// readyWith: the NaradCluster is Ready for its current generation with n ready brokers.
func readyWith(g Gomega, ctx context.Context, n int32) {
	var nc naradv1.NaradCluster
	g.Expect(k8s.Get(ctx, ncKey, &nc)).To(Succeed())
	c := meta.FindStatusCondition(nc.Status.Conditions, naradv1.ConditionReady)
	g.Expect(c).NotTo(BeNil(), "no Ready condition yet")
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
	g.Expect(c.ObservedGeneration).To(Equal(nc.Generation))
	g.Expect(nc.Status.ReadyReplicas).To(Equal(n))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// claimVolume is the PersistentVolume the claim of the suite's namespace is bound to.
func claimVolume(ctx context.Context, claim string) string {
	var pvc corev1.PersistentVolumeClaim
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: suiteNS, Name: claim}, &pvc)).To(Succeed())
	Expect(pvc.Spec.VolumeName).NotTo(BeEmpty())
	return pvc.Spec.VolumeName
}

// deleteNamespace deletes ns and waits until it is gone.
func deleteNamespace(ctx context.Context, ns string) {
	var n corev1.Namespace
	err := k8s.Get(ctx, types.NamespacedName{Name: ns}, &n)
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(ctrlclient.IgnoreNotFound(k8s.Delete(ctx, &n))).To(Succeed())
	Eventually(ctx, func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}))
	}).WithTimeout(4*time.Minute).Should(BeTrue(), "namespace %s still there", ns)
}
