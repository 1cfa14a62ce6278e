package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// VolumeLossPolicy is what the operator does about a broker whose data volume is lost.
// +kubebuilder:validation:Enum=Wait;Recreate
type VolumeLossPolicy string

const (
	// VolumeLossWait reports the loss (condition VolumeLost, event) and changes nothing: an
	// administrator restores the volume or deletes the claim and pod.
	VolumeLossWait VolumeLossPolicy = "Wait"
	// VolumeLossRecreate deletes the lost claim and the pod, so that the StatefulSet controller
	// creates both afresh; the broker starts with an empty data directory and the brokers copy
	// its replicated partitions back into it. Its single-replica partitions are lost with the
	// volume either way.
	VolumeLossRecreate VolumeLossPolicy = "Recreate"
)

// Condition types of the replication-safety code (PodDisruptionBudget and volume loss).
const (
	// ConditionDisruptionsBlocked is True on a NaradCluster while its PodDisruptionBudget allows
	// no voluntary disruption because a replicated partition has no more in-sync replicas than
	// its min_insync_replicas (one more broker down would stop its produce).
	ConditionDisruptionsBlocked = "DisruptionsBlocked"
	// ConditionVolumeLost is True on a NaradCluster while a broker's data volume is lost and
	// its pod has not run again (status.volumeLoss lists them).
	ConditionVolumeLost = "VolumeLost"
)

// Why a volume counts as lost (LostVolume.Reason).
const (
	// VolumeLossClaimDeleted: the pod's claim is being deleted or is gone.
	VolumeLossClaimDeleted = "ClaimDeleted"
	// VolumeLossClaimLost: the claim's phase is Lost (its PersistentVolume was deleted).
	VolumeLossClaimLost = "ClaimLost"
	// VolumeLossVolumeGone: the PersistentVolume the claim is bound to does not exist.
	VolumeLossVolumeGone = "VolumeGone"
	// VolumeLossVolumeReleased: the PersistentVolume is Released or Failed, or bound to another claim.
	VolumeLossVolumeReleased = "VolumeReleased"
	// VolumeLossNodeGone: the PersistentVolume is pinned (node affinity on one hostname, a
	// local volume) to a node that no longer exists.
	VolumeLossNodeGone = "NodeGone"
)

// LostVolume is one broker whose data volume is lost.
type LostVolume struct {
	// Pod is the broker pod.
	Pod string `json:"pod"`
	// Claim is the PersistentVolumeClaim that was lost.
	Claim string `json:"claim"`
	// Reason is ClaimDeleted, ClaimLost, VolumeGone, VolumeReleased or NodeGone.
	Reason string `json:"reason"`
	// Message says what the operator saw.
	// +optional
	Message string `json:"message,omitempty"`
	// DetectedAt is when the operator first saw the loss.
	DetectedAt metav1.Time `json:"detectedAt"`
	// RecreatedAt is when the operator (onVolumeLoss Recreate) deleted the claim and the pod;
	// absent with Wait.
	// +optional
	RecreatedAt *metav1.Time `json:"recreatedAt,omitempty"`
}
