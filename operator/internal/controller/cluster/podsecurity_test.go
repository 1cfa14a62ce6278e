package cluster

import (
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/naming"
)

// podFromTemplate is the pod ordinal the StatefulSet controller would create from sts: its
// template, with the claim template's volume (envtest runs no StatefulSet controller).
func podFromTemplate(sts *appsv1.StatefulSet, ordinal int) *corev1.Pod {
	tpl := sts.Spec.Template.DeepCopy()
	name := sts.Name + "-" + strconv.Itoa(ordinal)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sts.Namespace, Labels: tpl.Labels, Annotations: tpl.Annotations},
		Spec:       tpl.Spec,
	}
	for _, c := range sts.Spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + name}}})
	}
	return pod
}

// enforceRestricted labels the namespace so the API server's PodSecurity admission refuses
// pods that break the restricted standard.
func enforceRestricted(ns string) {
	GinkgoHelper()
	var n corev1.Namespace
	Expect(k8sClient.Get(ctx, ctrlclient.ObjectKey{Name: ns}, &n)).To(Succeed())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	n.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	Expect(k8sClient.Update(ctx, &n)).To(Succeed())
}

var _ = Describe("Broker pod security", func() {
	It("gives pods that a namespace enforcing the restricted standard admits, and default resources", func() {
		enforceRestricted(namespace)
		nc := testCluster("psa")
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		ps := sts.Spec.Template.Spec
		Expect(ps.InitContainers).To(HaveLen(1), "the rack init container is checked too")

		By("every container has a read-only root filesystem (the standard does not ask for it)")
		for _, c := range append(ps.InitContainers, ps.Containers...) {
			Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
		}

		By("the pod is admitted (a server-side dry run goes through admission)")
		pod := podFromTemplate(&sts, 0)
		Expect(k8sClient.Create(ctx, pod.DeepCopy(), ctrlclient.DryRunAll)).To(Succeed())

		By("a pod with one field broken is refused, so the admission is live")
		for what, breakIt := range map[string]func(*corev1.Pod){
			"broker may escalate": func(p *corev1.Pod) {
				p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true)
			},
			"init container keeps its capabilities": func(p *corev1.Pod) {
				p.Spec.InitContainers[0].SecurityContext.Capabilities = nil
			},
			"no seccomp profile": func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = nil },
			"may run as root": func(p *corev1.Pod) {
				p.Spec.SecurityContext.RunAsNonRoot = nil
				p.Spec.SecurityContext.RunAsUser = new(int64(0))
				for i := range p.Spec.InitContainers {
					p.Spec.InitContainers[i].SecurityContext.RunAsNonRoot = nil
				}
				p.Spec.Containers[0].SecurityContext.RunAsNonRoot = nil
			},
		} {
			broken := pod.DeepCopy()
			breakIt(broken)
			err := k8sClient.Create(ctx, broken, ctrlclient.DryRunAll)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
			Expect(err.Error()).To(ContainSubstring("violates PodSecurity"), what)
		}

		By("resources default when spec.resources is empty, with GOMEMLIMIT under the memory limit")
		c := ps.Containers[0]
		Expect(c.Resources.Requests.Cpu().Equal(resource.MustParse("250m"))).To(BeTrue(), "%v", c.Resources)
		Expect(c.Resources.Requests.Memory().Equal(resource.MustParse("512Mi"))).To(BeTrue(), "%v", c.Resources)
		Expect(c.Resources.Limits.Memory().Equal(resource.MustParse("2Gi"))).To(BeTrue(), "%v", c.Resources)
		Expect(c.Resources.Limits.Cpu().IsZero()).To(BeTrue(), "no CPU limit: %v", c.Resources)
		Expect(envMap(c.Env)).To(HaveKeyWithValue("GOMEMLIMIT", strconv.FormatInt(2<<30/100*90, 10)))
	})
})
