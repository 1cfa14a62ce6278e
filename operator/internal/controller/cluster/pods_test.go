package cluster

import (
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
)

// The helpers below play the StatefulSet controller and the kubelet, which envtest lacks.

// makePod creates pod ordinal of nc on revision rev, Ready or not. A pod of that name the
// operator just deleted may still be visible for a moment (podNames already hides it once it
// carries a deletion timestamp), so the create is retried while the name is taken, as the
// StatefulSet controller would on its next pass.
func makePod(nc *naradv1.NaradCluster, ordinal int32, rev string, ready bool) {
	labels := naming.Labels(nc)
	labels[appsv1.ControllerRevisionHashLabelKey] = rev
	EventuallyWithOffset(1, func() error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: naming.PodName(nc, ordinal), Namespace: nc.Namespace, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: naming.ContainerName, Image: "narad:test"}}},
		}
		return k8sClient.Create(ctx, p)
	}).Should(Succeed())
	setPodReady(nc, ordinal, ready)
}

// setPodReady sets the Ready condition of pod ordinal of nc.
func setPodReady(nc *naradv1.NaradCluster, ordinal int32, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	EventuallyWithOffset(1, func() error {
		var p corev1.Pod
		if err := k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: nc.Namespace, Name: naming.PodName(nc, ordinal)}, &p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		return k8sClient.Status().Update(ctx, &p)
	}).Should(Succeed())
}

// setUpdateRevision writes the StatefulSet status as its controller would after observing the
// current template: update revision rev, every replica existing.
func setUpdateRevision(nc *naradv1.NaradCluster, rev string) {
	EventuallyWithOffset(1, func() error {
		var sts appsv1.StatefulSet
		if err := k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: nc.Namespace, Name: naming.StatefulSet(nc)}, &sts); err != nil {
			return err
		}
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.Replicas = *sts.Spec.Replicas
		sts.Status.UpdateRevision = rev
		if sts.Status.CurrentRevision == "" {
			sts.Status.CurrentRevision = rev
		}
		return k8sClient.Status().Update(ctx, &sts)
	}).Should(Succeed())
}

// podNames lists the names of nc's pods that exist and are not being deleted.
func podNames(nc *naradv1.NaradCluster) []string {
	var pl corev1.PodList
	ExpectWithOffset(1, k8sClient.List(ctx, &pl, ctrlclient.InNamespace(nc.Namespace),
		ctrlclient.MatchingLabels(naming.Selector(nc)))).To(Succeed())
	var out []string
	for _, p := range pl.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// runningCluster creates nc (3 replicas, admin Secret the fake accepts), its StatefulSet
// status on revision rev and three Ready pods on rev, and points the fake brokers at it.
func runningCluster(nc *naradv1.NaradCluster, rev string) {
	currentFake().Update(func(c *brokertest.Cluster) { *c = defaultBrokers(nc.Name) })
	mustCreate(nc)
	var sts appsv1.StatefulSet
	awaitObject(naming.StatefulSet(nc), &sts)
	setUpdateRevision(nc, rev)
	for i := range *sts.Spec.Replicas {
		makePod(nc, i, rev, true)
	}
}
