package cluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// storageClass creates a cluster-scoped StorageClass for the current spec, removed after it.
func storageClass(expand bool) string {
	GinkgoHelper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: namespace + "-class"},
		Provisioner: "example.com/none", AllowVolumeExpansion: new(expand)}
	Expect(k8sClient.Create(ctx, sc)).To(Succeed())
	DeferCleanup(func() { Expect(ctrlclient.IgnoreNotFound(k8sClient.Delete(ctx, sc))).To(Succeed()) })
	return sc.Name
}

// boundClaims creates the data claims of nc's ordinals the way the StatefulSet controller and a
// provisioner would (envtest runs neither): of class, requesting and holding size, Bound.
func boundClaims(nc *naradv1.NaradCluster, class, size string) {
	GinkgoHelper()
	for o := range nc.Spec.Replicas {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: naming.PVC(nc, o), Namespace: namespace, Labels: naming.Labels(nc)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		setCapacity(c.Name, size)
	}
}

// setCapacity marks a claim Bound with the given capacity, as the volume's growth would.
func setCapacity(claim, size string) {
	GinkgoHelper()
	Eventually(func() error {
		var c corev1.PersistentVolumeClaim
		if err := k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: claim}, &c); err != nil {
			return err
		}
		c.Status.Phase = corev1.ClaimBound
		c.Status.AccessModes = c.Spec.AccessModes
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		return k8sClient.Status().Update(ctx, &c)
	}).Should(Succeed())
}

// claimRequests maps each of nc's claims to its storage request.
func claimRequests(nc *naradv1.NaradCluster) map[string]string {
	out := map[string]string{}
	for o := range nc.Spec.Replicas {
		var c corev1.PersistentVolumeClaim
		mustGet(naming.PVC(nc, o), &c)
		q := c.Spec.Resources.Requests[corev1.ResourceStorage]
		out[c.Name] = q.String()
	}
	return out
}

func sized(nc *naradv1.NaradCluster, size string) map[string]string {
	out := map[string]string{}
	for o := range nc.Spec.Replicas {
		out[naming.PVC(nc, o)] = size
	}
	return out
}

func growTo(nc *naradv1.NaradCluster, size string) {
	GinkgoHelper()
	mutate(nc.Name, &naradv1.NaradCluster{}, func(c *naradv1.NaradCluster) {
		c.Spec.Storage.Size = new(resource.MustParse(size))
	})
}

func storageStatus(name string) naradv1.StorageStatus {
	var nc naradv1.NaradCluster
	mustGet(name, &nc)
	if nc.Status.Storage == nil {
		return naradv1.StorageStatus{}
	}
	return *nc.Status.Storage
}

var _ = Describe("NaradCluster storage growth", func() {
	It("expands every broker claim when the StorageClass allows it, keeping the StatefulSet's template", func() {
		class := storageClass(true)
		nc := testCluster("grow", func(nc *naradv1.NaradCluster) {
			nc.Spec.Storage.StorageClassName = &class
			nc.Spec.Storage.Size = new(resource.MustParse("10Gi"))
		})
		mustCreate(nc)
		var sts appsv1.StatefulSet
		awaitObject(naming.StatefulSet(nc), &sts)
		boundClaims(nc, class, "10Gi")
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumesResizing) }).
			Should(haveCondition(metav1.ConditionFalse, ReasonVolumesAtSize))

		growTo(nc, "20Gi")
		Eventually(func() map[string]string { return claimRequests(nc) }).Should(Equal(sized(nc, "20Gi")))
		By("the claims report 10Gi until their volumes grow: the cluster shows them resizing")
		Eventually(func() naradv1.StorageStatus { return storageStatus(nc.Name) }).Should(Equal(naradv1.StorageStatus{
			TemplateSize: "10Gi", Size: "20Gi", Resizing: []string{"data-grow-0", "data-grow-1", "data-grow-2"}}))
		Expect(clusterCondition(nc.Name, naradv1.ConditionVolumesResizing)).To(haveCondition(metav1.ConditionTrue, ReasonExpanding))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement("ExpandingVolumes"))

		By("the StatefulSet's claim template is immutable and keeps the creation size")
		mustGet(naming.StatefulSet(nc), &sts)
		tmpl := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
		Expect(tmpl.String()).To(Equal("10Gi"))

		By("the volumes reach 20Gi")
		for o := range nc.Spec.Replicas {
			setCapacity(naming.PVC(nc, o), "20Gi")
		}
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumesResizing) }).
			Should(haveCondition(metav1.ConditionFalse, ReasonVolumesAtSize))
		Expect(storageStatus(nc.Name)).To(Equal(naradv1.StorageStatus{TemplateSize: "10Gi", Size: "20Gi"}))
	})

	It("patches no claim and says why when the StorageClass does not allow expansion", func() {
		class := storageClass(false)
		nc := testCluster("fixed", func(nc *naradv1.NaradCluster) {
			nc.Spec.Storage.StorageClassName = &class
			nc.Spec.Storage.Size = new(resource.MustParse("10Gi"))
		})
		mustCreate(nc)
		awaitObject(naming.StatefulSet(nc), &appsv1.StatefulSet{})
		boundClaims(nc, class, "10Gi")

		growTo(nc, "20Gi")
		Eventually(func() *metav1.Condition { return clusterCondition(nc.Name, naradv1.ConditionVolumesResizing) }).
			Should(haveCondition(metav1.ConditionFalse, ReasonExpansionNotAllowed))
		Expect(conditionMessage(nc.Name, naradv1.ConditionVolumesResizing)).To(ContainSubstring("does not allow volume expansion"))
		Eventually(func() []string { return eventReasons(nc.Name) }).Should(ContainElement(ReasonExpansionNotAllowed))
		// The condition is written by the pass that decided not to patch.
		Expect(claimRequests(nc)).To(Equal(sized(nc, "10Gi")))
		Expect(storageStatus(nc.Name)).To(Equal(naradv1.StorageStatus{TemplateSize: "10Gi", Size: "10Gi"}))
	})

	It("has the API server refuse a smaller spec.storage.size (CEL)", func() {
		nc := testCluster("noshrink", func(nc *naradv1.NaradCluster) { nc.Spec.Storage.Size = new(resource.MustParse("20Gi")) })
		mustCreate(nc)
		// Retried past conflicts with the controller's own writes until the API server answers.
		Eventually(func() error {
			mustGet(nc.Name, nc)
			nc.Spec.Storage.Size = new(resource.MustParse("19Gi"))
			return k8sClient.Update(ctx, nc)
		}).Should(MatchError(ContainSubstring("storage.size may not shrink")))
		mutate(nc.Name, &naradv1.NaradCluster{}, func(c *naradv1.NaradCluster) {
			c.Spec.Storage.Size = new(resource.MustParse("20480Mi")) // the same size in other units is no shrink
		})
	})
})
