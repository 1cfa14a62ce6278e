package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxFanoutDelayMs is the longest fan-out delay the brokers accept: 365 days in milliseconds.
const MaxFanoutDelayMs = 31536000000

// FanoutLinkSpec attaches a child to a parent topic (POST /v1/topics/{parent}/children): the
// child receives every parent record committed from the start point on, after DelayMs. The
// child is either a topic of the same cluster (Child) or a topic of another Narad cluster
// (Remote), never both. Parent, child, remote target and delay are fixed for the life of the
// link; to change one, delete the FanoutLink and create another.
//
// +kubebuilder:validation:XValidation:rule="has(self.child) != has(self.remote)",message="exactly one of child and remote must be set"
// +kubebuilder:validation:XValidation:rule="has(self.remote) == has(oldSelf.remote)",message="a link cannot switch between child and remote"
// +kubebuilder:validation:XValidation:rule="!has(self.child) || self.parent != self.child",message="parent and child must differ"
// +kubebuilder:validation:XValidation:rule="!has(self.childPartitions) || (has(self.createChild) && self.createChild)",message="childPartitions is only used with createChild"
// +kubebuilder:validation:XValidation:rule="!has(self.remote) || !has(self.createChild) || !self.createChild",message="createChild is not used with remote"
type FanoutLinkSpec struct {
	// ClusterRef is the NaradCluster holding the parent (and a local child). Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterRef is immutable"
	ClusterRef ClusterReference `json:"clusterRef"`

	// Parent is the broker name of the parent topic. Immutable.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="parent must not be '.' or '..'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="parent is immutable"
	Parent string `json:"parent"`

	// Child is the broker name of the child topic, on the same cluster. Set exactly one of
	// child and remote. Immutable.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="child must not be '.' or '..'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="child is immutable"
	// +optional
	Child string `json:"child,omitempty"`

	// Remote makes the child a topic of another Narad cluster (a remote child, docs/internals/fanout.md §13): the parent's owners send every record to the target's batch produce. Set exactly one
	// of child and remote. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="remote is immutable"
	// +optional
	Remote *FanoutRemote `json:"remote,omitempty"`

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

	// LinkID is the brokers' id of a remote link (remote:<topic>@<host:port>), the name its
	// detach uses.
	// +optional
	LinkID string `json:"linkID,omitempty"`

	// TargetURL is the comma-separated list of target base URLs the remote link was attached
	// with (resolved from remote.clusterRef or copied from remote.url).
	// +optional
	TargetURL string `json:"targetURL,omitempty"`

	// RemoteState is the brokers' state of a remote link: active, target_unreachable,
	// unauthorized, target_topic_missing, rejected, behind_retention, or incomplete when a
	// parent partition did not report.
	// +optional
	RemoteState string `json:"remoteState,omitempty"`

	// RecoveryPoint of a remote link: parent partition (decimal) → the lowest offset the
	// target has not confirmed yet. A restart or move resumes from here (duplicates on the
	// target are possible, gaps are not).
	// +optional
	RecoveryPoint map[string]int64 `json:"recoveryPoint,omitempty"`

	// LastError is the remote link's last send error as the brokers report it (never holds
	// credentials).
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// FanoutRemote is the target of a remote child: a topic of another Narad cluster, reached
// through a NaradCluster of this Kubernetes cluster (ClusterRef) or a list of URLs (URL).
//
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.url)",message="exactly one of clusterRef and url must be set"
type FanoutRemote struct {
	// ClusterRef names the target NaradCluster; the operator sends through its client Service
	// (scheme per its TLS). Without credentialsSecretRef the target's admin Secret is used,
	// which the operator only does for a target in the FanoutLink's own namespace.
	// +optional
	ClusterRef *RemoteClusterReference `json:"clusterRef,omitempty"`

	// URL lists the target cluster's base URLs, comma-separated, tried in order
	// ("http://host:7942,http://host2:7942"; at most 8; scheme://host:port only).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^,/ ]+/?( *, *https?://[^,/ ]+/?)*$`
	// +optional
	URL string `json:"url,omitempty"`

	// Topic is the broker name of the target topic; it must exist on the target and must not
	// be a delay child there.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="topic must not be '.' or '..'"
	Topic string `json:"topic"`

	// CredentialsSecretRef names a Secret in the FanoutLink's namespace holding the user and
	// password the brokers send with. Absent: the target NaradCluster's admin Secret (same
	// namespace only), or no credentials for a url target.
	// +optional
	CredentialsSecretRef *CredentialsSecretReference `json:"credentialsSecretRef,omitempty"`

	// Start is where the copy begins on each parent partition: attach (the attach point),
	// consumer_frontier (the parent's committed consumer offset) or oldest (the oldest retained
	// record).
	// +kubebuilder:default=attach
	// +optional
	Start FanoutStart `json:"start,omitempty"`
}

// FanoutStart is where a remote child's copy begins.
// +kubebuilder:validation:Enum=attach;consumer_frontier;oldest
type FanoutStart string

const (
	// FanoutStartAttach copies the records committed after the attach.
	FanoutStartAttach FanoutStart = "attach"
	// FanoutStartConsumerFrontier copies from the parent's committed consumer offset.
	FanoutStartConsumerFrontier FanoutStart = "consumer_frontier"
	// FanoutStartOldest copies from the oldest retained record.
	FanoutStartOldest FanoutStart = "oldest"
)

// RemoteClusterReference names a NaradCluster, in any namespace.
type RemoteClusterReference struct {
	// Name of the NaradCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the NaradCluster; the FanoutLink's own when empty.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// CredentialsSecretReference names a Secret holding a user name and a password, and the keys
// they are under.
type CredentialsSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// UserKey is the key of the user name.
	// +kubebuilder:default=username
	// +kubebuilder:validation:MinLength=1
	// +optional
	UserKey string `json:"userKey,omitempty"`

	// PasswordKey is the key of the password (at most 72 bytes).
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
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

// FanoutLink is a fan-out link from a topic of one NaradCluster to another topic of that
// cluster, or to a topic of another Narad cluster (a remote child).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fl,categories=narad
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Child",type=string,JSONPath=`.spec.child`
// +kubebuilder:printcolumn:name="Delay",type=integer,JSONPath=`.spec.delayMs`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Lag",type=integer,JSONPath=`.status.lag`
// +kubebuilder:printcolumn:name="Remote",type=string,JSONPath=`.spec.remote.topic`,priority=1
// +kubebuilder:printcolumn:name="Remote-State",type=string,JSONPath=`.status.remoteState`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
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
