package cluster

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Default placement of the broker pods (docs/kubernetes.md, "Racks and placement"): spread
// over nodes and zones so that the replicas of a partition, which the brokers put on distinct
// racks (zones), also end up on distinct machines. Both are preferences: a cluster with fewer
// nodes or zones than brokers still schedules every pod.
const (
	hostnameTopologyKey = "kubernetes.io/hostname"
	zoneTopologyKey     = "topology.kubernetes.io/zone"
	// antiAffinityWeight of the preferred one-broker-per-node term (1 … 100).
	antiAffinityWeight = 100
)

// affinity is spec.scheduling.affinity, or, when it sets none, a preferred anti-affinity of
// the cluster's pods per node.
func affinity(nc *naradv1.NaradCluster) *corev1.Affinity {
	if a := nc.Spec.Scheduling.Affinity; a != nil {
		return a.DeepCopy()
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: antiAffinityWeight,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   hostnameTopologyKey,
				LabelSelector: &metav1.LabelSelector{MatchLabels: naming.Selector(nc)},
			},
		}},
	}}
}

// defaultSpread spreads the cluster's pods evenly over zones when spec.scheduling sets no
// constraint of its own (ScheduleAnyway: a single-zone cluster is not held back).
func defaultSpread(nc *naradv1.NaradCluster) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       zoneTopologyKey,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: naming.Selector(nc)},
	}}
}
