package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxFanoutDelayMs is the longest fan-out delay the brokers accept: 365 days in milliseconds.
const MaxFanoutDelayMs = 31536000000

// FanoutLinkSpec attaches a child topic to a parent topic (POST /v1/topics/{parent}/children):
// the child receives every parent record committed from the attach point on, after DelayMs.
// Parent, child and delay are fixed for the life of the link; to change one, delete the
// FanoutLink and create another.
//
// +kubebuilder:validation:XValidation:rule="self.parent != self.child",message="parent and child must differ"
// +kubebuilder:validation:XValidation:rule="!has(self.childPartitions) || (has(self.createChild) && self.createChild)",message="childPartitions is only used with createChild"
type FanoutLinkSpec struct {
	// ClusterRef is the NaradCluster holding both topics. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterRef is immutable"
	ClusterRef ClusterReference `json:"clusterRef"`

	// Parent is the broker name of the parent topic. Immutable.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="parent must not be '.' or '..'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="parent is immutable"
	Parent string `json:"parent"`

	// Child is the broker name of the child topic. Immutable.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="child must not be '.' or '..'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="child is immutable"
	Child string `json:"child"`

	// DelayMs holds each record back from the child this long after its commit on the parent,
	// in milliseconds (0 … 31536000000). The parent's retention must be 0 or at least
	// delayMs + 1 h. Immutable.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="delayMs is immutable"
	// +kubebuilder:default=0
	// +optional
	DelayMs int64 `json:"delayMs"`

	// CreateChild creates the child topic together with the link in one call (the replica
	// pattern: child partition p is placed away from parent partition p's owner). The child must
	// not exist yet. Use a Topic object instead to manage the child's settings.
	// +optional
	CreateChild bool `json:"createChild,omitempty"`

	// ChildPartitions of a child made by createChild. Absent: the parent's count.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=108
	// +optional
	ChildPartitions *int32 `json:"childPartitions,omitempty"`
}

// FanoutLinkStatus is what the operator last observed of the link.
type FanoutLinkStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Degraded.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Epoch is the broker's attach epoch (16 hex digits); a new attach gets a new one.
	// +optional
	Epoch string `json:"epoch,omitempty"`

	// State of the link: Pending, Attached, Detaching or Failed.
	// +optional
	State FanoutLinkState `json:"state,omitempty"`

	// Lag is the number of parent records not yet delivered to the child, over all partitions.
	// +optional
	Lag int64 `json:"lag,omitempty"`

	// DueLagSeconds is the age of the oldest record that is due (past its delay) and not yet
	// delivered; 0 when none.
	// +optional
	DueLagSeconds int64 `json:"dueLagSeconds,omitempty"`
}

// FanoutLinkState is the life-cycle state of a FanoutLink.
// +kubebuilder:validation:Enum=Pending;Attached;Detaching;Failed
type FanoutLinkState string

const (
	// FanoutLinkPending: not attached yet (the cluster or a topic is not ready).
	FanoutLinkPending FanoutLinkState = "Pending"
	// FanoutLinkAttached: the brokers hold the link; records flow.
	FanoutLinkAttached FanoutLinkState = "Attached"
	// FanoutLinkDetaching: the object is being deleted and the detach has not completed.
	FanoutLinkDetaching FanoutLinkState = "Detaching"
	// FanoutLinkFailed: the brokers refused the attach; the Degraded condition says why.
	FanoutLinkFailed FanoutLinkState = "Failed"
)

// FanoutLink is a fan-out link between two topics of one NaradCluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fl,categories=narad
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Child",type=string,JSONPath=`.spec.child`
// +kubebuilder:printcolumn:name="Delay",type=integer,JSONPath=`.spec.delayMs`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Lag",type=integer,JSONPath=`.status.lag`
type FanoutLink struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FanoutLinkSpec   `json:"spec"`
	Status FanoutLinkStatus `json:"status,omitempty"`
}

// FanoutLinkList is a list of FanoutLinks.
//
// +kubebuilder:object:root=true
type FanoutLinkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FanoutLink `json:"items"`
}
