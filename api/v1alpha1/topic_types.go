package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeletionPolicy says what deleting a Topic does to the broker topic.
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes the broker topic and its data.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain leaves the broker topic and its data in place.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// TopicNamePattern is the broker's topic name rule (docs/internals/http-api.md §1.7); "." and ".." are refused
// separately.
const TopicNamePattern = `^[A-Za-z0-9._-]{1,255}$`

// TopicSpec is the desired state of a broker topic (POST/PATCH /v1/topics). Limits follow
// docs/internals/http-api.md §1.7, §2.2. Absent optional fields take the broker's defaults.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.name) || (has(self.name) && self.name == oldSelf.name)",message="name is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(self.replicationFactor) || !has(self.minInSyncReplicas) || self.minInSyncReplicas <= self.replicationFactor",message="minInSyncReplicas must not exceed replicationFactor"
type TopicSpec struct {
	// ClusterRef is the NaradCluster holding the topic. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterRef is immutable"
	ClusterRef ClusterReference `json:"clusterRef"`

	// Name of the broker topic. Empty means metadata.name (the operator writes it back);
	// immutable once set.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,255}$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="name must not be '.' or '..'"
	// +optional
	Name string `json:"name,omitempty"`

	// Partitions of the topic. May grow, never shrink.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=108
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="partitions may not decrease"
	// +kubebuilder:default=3
	// +optional
	Partitions int32 `json:"partitions"`

	// RetentionMs: 0 keeps forever, otherwise at least 3600000 (1 h) and at most 315360000000
	// (3,650 days). Absent: the cluster default.
	// +kubebuilder:validation:XValidation:rule="self == 0 || self >= 3600000",message="retentionMs must be 0 (forever) or at least 3600000 (1h)"
	// +kubebuilder:validation:Maximum=315360000000
	// +optional
	RetentionMs *int64 `json:"retentionMs,omitempty"`

	// VisibilityTimeoutMs is how long a consumed message stays reserved before redelivery.
	// Absent: 30000. At most 43200000 (12 h).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=43200000
	// +optional
	VisibilityTimeoutMs *int64 `json:"visibilityTimeoutMs,omitempty"`

	// MaxInFlightPerPartition caps reserved, unacknowledged messages per partition. Absent: 1024.
	// At most 65536.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxInFlightPerPartition *int64 `json:"maxInFlightPerPartition,omitempty"`

	// MaxAckedAheadPerPartition caps acknowledgements ahead of the oldest unacknowledged
	// message per partition. Absent: 1024. At most 65536.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +optional
	MaxAckedAheadPerPartition *int64 `json:"maxAckedAheadPerPartition,omitempty"`

	// Schema is a JSON Schema document every produced message must match. Absent: none.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +optional
	Schema *runtime.RawExtension `json:"schema,omitempty"`

	// ReplicationFactor is the copies of each partition (1 … 5; docs/replication.md). Absent:
	// the cluster's spec.topicDefaults. On a live topic it changes only within 2 … 5: the
	// brokers refuse a change from or to 1 (the Degraded condition shows their answer).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	ReplicationFactor *int32 `json:"replicationFactor,omitempty"`

	// MinInSyncReplicas is the in-sync copies a 202 needs (1 … replicationFactor). Absent: the
	// cluster default, min(2, R) unless spec.topicDefaults.minInSyncReplicas says otherwise.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	MinInSyncReplicas *int32 `json:"minInSyncReplicas,omitempty"`

	// DeletionPolicy: Delete removes the broker topic with this object, Retain keeps it.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// TopicStatus is what the operator last observed of the broker topic.
type TopicStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Progressing, Degraded, UnderReplicated.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Partitions is the broker topic's partition count.
	// +optional
	Partitions int32 `json:"partitions,omitempty"`

	// Owners is the owner spread: node ID → partitions it owns.
	// +optional
	Owners map[string]int32 `json:"owners,omitempty"`

	// Backlog is the number of messages not yet consumed, summed over partitions.
	// +optional
	Backlog int64 `json:"backlog,omitempty"`

	// Incarnation identifies this broker topic; it changes when a topic of the same name is
	// deleted and created again.
	// +optional
	Incarnation string `json:"incarnation,omitempty"`

	// ReplicationFactor is the broker topic's replication factor (1 when unreplicated).
	// +optional
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`

	// MinInSyncReplicas is the broker topic's min_insync_replicas in effect.
	// +optional
	MinInSyncReplicas int32 `json:"minInSyncReplicas,omitempty"`

	// UnderReplicatedPartitions counts the topic's partitions with fewer in-sync replicas than
	// the replication factor, or no leader.
	// +optional
	UnderReplicatedPartitions int32 `json:"underReplicatedPartitions"`

	// UnderMinInSyncPartitions counts the topic's partitions with fewer in-sync replicas than
	// min_insync_replicas; they refuse produce.
	// +optional
	UnderMinInSyncPartitions int32 `json:"underMinInSyncPartitions"`
}

// Topic is a Narad broker topic, kept in line with its spec through the admin API.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ntopic,categories=narad
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.status.partitions`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Backlog",type=integer,JSONPath=`.status.backlog`
// +kubebuilder:printcolumn:name="R",type=integer,JSONPath=`.status.replicationFactor`
// +kubebuilder:printcolumn:name="UnderReplicated",type=integer,JSONPath=`.status.underReplicatedPartitions`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Topic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TopicSpec   `json:"spec"`
	Status TopicStatus `json:"status,omitempty"`
}

// TopicList is a list of Topics.
//
// +kubebuilder:object:root=true
type TopicList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topic `json:"items"`
}
