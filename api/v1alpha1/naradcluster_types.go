package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PVCRetentionPolicy says what happens to a removed pod's PersistentVolumeClaim after a
// scale-down. The claim is only touched once its node owns nothing and has left Raft.
// +kubebuilder:validation:Enum=Delete;Retain
type PVCRetentionPolicy string

const (
	// PVCRetentionDelete deletes the claim (and, with a Delete reclaim policy, the volume).
	PVCRetentionDelete PVCRetentionPolicy = "Delete"
	// PVCRetentionRetain keeps the claim; scaling out again reuses it.
	PVCRetentionRetain PVCRetentionPolicy = "Retain"
)

// NaradClusterSpec is the desired state of a Narad broker cluster.
//
// Pod ordinal i runs node ID "<name>-i"; ordinals 0 … initialClusterSize-1 bootstrap Raft.
// Lowering replicas decommissions the highest ordinals through the brokers before any pod goes.
//
// The has() guards only matter when the API server checks the spec's own default ({}), which it
// does before nested defaults fill replicas and initialClusterSize.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || !has(self.replicas) || !has(self.initialClusterSize) || self.replicas >= self.initialClusterSize",optionalOldSelf=true,message="replicas must be at least initialClusterSize when the cluster is created"
type NaradClusterSpec struct {
	// Replicas is the number of broker pods. Lowering it is a decommission: the brokers move the
	// highest ordinals' partitions away first and may refuse (see the Degraded condition).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=3
	// +optional
	Replicas int32 `json:"replicas"`

	// InitialClusterSize is how many ordinals bootstrap the Raft cluster. Odd; fixed at creation.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="initialClusterSize must be odd"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="initialClusterSize is immutable"
	// +kubebuilder:default=3
	// +optional
	InitialClusterSize int32 `json:"initialClusterSize"`

	// Image is the broker container image. Empty means the operator's default broker image.
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the broker container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Storage of each pod's data directory.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage"`

	// Resources of the broker container. A resource this leaves out gets a default: requests
	// cpu 250m and memory 512Mi when neither a request nor a limit names them, and a 2Gi memory
	// limit when memory is not mentioned at all. A memory limit also sets the brokers'
	// GOMEMLIMIT to 90% of it. See docs/kubernetes.md "Pod security".
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Scheduling places the broker pods.
	// +optional
	Scheduling SchedulingSpec `json:"scheduling,omitempty"`

	// Broker holds cluster-wide broker settings (passed as `narad serve` flags).
	// +optional
	Broker BrokerConfig `json:"broker,omitempty"`

	// Security names the Secrets holding the cluster secret and the admin password.
	// +optional
	Security SecuritySpec `json:"security,omitempty"`

	// TLS turns on HTTPS for the API and TLS between nodes. Absent means plain text.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Service shapes the client Service (the headless Service is not configurable).
	// +optional
	Service ServiceSpec `json:"service,omitempty"`

	// Monitoring of the broker pods.
	// +optional
	Monitoring MonitoringSpec `json:"monitoring,omitempty"`

	// TopicDefaults are the replication settings of topics created without their own
	// (docs/replication.md), passed to every broker as flags.
	// +optional
	TopicDefaults TopicDefaults `json:"topicDefaults,omitempty"`
}

// TopicDefaults are the cluster's replication defaults: a topic that names no replication
// factor or min_insync_replicas of its own gets these when it is created.
//
// +kubebuilder:validation:XValidation:rule="!has(self.replicationFactor) || !has(self.minInSyncReplicas) || self.minInSyncReplicas <= self.replicationFactor",message="minInSyncReplicas must not exceed replicationFactor"
type TopicDefaults struct {
	// ReplicationFactor is the copies of each partition of a new topic (1 … 5), passed as
	// --default-replication-factor. Absent: 3 when spec.replicas is at least 3, else 1, which
	// status.replication.defaultReplicationFactor shows. Changing it (or, while it is absent,
	// crossing spec.replicas 3) restarts the brokers one at a time; existing topics keep theirs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	ReplicationFactor *int32 `json:"replicationFactor,omitempty"`

	// MinInSyncReplicas is the in-sync copies a 202 needs on a new replicated topic (1 … 5),
	// passed as --default-min-insync-replicas; a topic with fewer copies gets its replication
	// factor. Absent: min(2, R) per topic.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	MinInSyncReplicas *int32 `json:"minInSyncReplicas,omitempty"`
}

// StorageSpec is each pod's PersistentVolumeClaim template and its fate on scale-down.
type StorageSpec struct {
	// StorageClassName of the claims; absent means the cluster's default class. Topics with a
	// replication factor of 2 or more keep copies on other brokers, so local PersistentVolumes
	// suit them; a topic with replication factor 1 lives on one volume only and is lost with it.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Size requested per pod. Raising it expands every broker's claim where the StorageClass
	// allows volume expansion (docs/kubernetes.md "Growing the volumes"); it may not shrink.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="storage.size may not shrink: a volume cannot be made smaller"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// PVCRetentionOnScaleDown is what happens to a removed ordinal's claim.
	// +kubebuilder:default=Retain
	// +optional
	PVCRetentionOnScaleDown PVCRetentionPolicy `json:"pvcRetentionOnScaleDown,omitempty"`

	// OnVolumeLoss is what the operator does when a broker's volume is lost (its claim deleted,
	// its PersistentVolume gone or released, or the node of its local volume deleted): Wait
	// reports it in the VolumeLost condition and an event and changes nothing; Recreate gives the
	// broker a fresh claim and pod, and the brokers copy its replicated partitions back into it.
	// See docs/kubernetes.md "Volume loss".
	// +kubebuilder:default=Wait
	// +optional
	OnVolumeLoss VolumeLossPolicy `json:"onVolumeLoss,omitempty"`
}

// SchedulingSpec is copied into the broker pod template.
type SchedulingSpec struct {
	// Affinity of the broker pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Tolerations of the broker pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of the broker pods. The operator fills in the label selector
	// when a constraint has none.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// NodeSelector of the broker pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// PriorityClassName of the broker pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// BrokerConfig holds cluster-wide broker defaults. Absent fields keep the broker's defaults.
//
// +kubebuilder:validation:XValidation:rule="!has(self.defaultPartitions) || !has(self.maxPartitions) || self.defaultPartitions <= self.maxPartitions",message="defaultPartitions must not exceed maxPartitions"
type BrokerConfig struct {
	// RetentionMs is the retention of topics created without one, in milliseconds: 0 keeps
	// forever, otherwise at least 3600000 (1 h) and at most 315360000000 (3,650 days). Broker
	// default 604800000 (7 days).
	// +kubebuilder:validation:XValidation:rule="self == 0 || self >= 3600000",message="retentionMs must be 0 (forever) or at least 3600000 (1h)"
	// +kubebuilder:validation:Maximum=315360000000
	// +optional
	RetentionMs *int64 `json:"retentionMs,omitempty"`

	// MaxConsumeWait is the long-poll ceiling of consume, a Go duration ("10s"). Broker default 10s.
	// +optional
	MaxConsumeWait *metav1.Duration `json:"maxConsumeWait,omitempty"`

	// DefaultPartitions of a topic created without a count. Broker default 3.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=108
	// +optional
	DefaultPartitions *int32 `json:"defaultPartitions,omitempty"`

	// MaxPartitions is the largest partition count a topic may have. Broker default 108.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=108
	// +optional
	MaxPartitions *int32 `json:"maxPartitions,omitempty"`

	// LogLevel of the brokers.
	// +kubebuilder:validation:Enum=debug;info;warn;error
	// +optional
	LogLevel string `json:"logLevel,omitempty"`

	// ExtraArgs are appended to `narad serve`, after the flags the operator sets.
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`
}

// SecuritySpec names the Secrets the brokers authenticate with. A Secret left unnamed is
// generated by the operator (random values) and owned by the NaradCluster.
type SecuritySpec struct {
	// AdminSecretRef names a Secret whose "admin-password" key is the root admin's password.
	// The operator uses that account to call the admin API.
	// +optional
	AdminSecretRef *SecretReference `json:"adminSecretRef,omitempty"`

	// ClusterSecretRef names a Secret whose "cluster-secret" key authenticates node-to-node calls.
	// +optional
	ClusterSecretRef *SecretReference `json:"clusterSecretRef,omitempty"`
}

// TLSSpec takes the brokers' certificate from a Secret or has cert-manager issue it.
// Setting neither is the same as leaving tls out.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.secretName) && has(self.certManager))",message="set at most one of secretName and certManager"
type TLSSpec struct {
	// SecretName of a kubernetes.io/tls Secret (tls.crt, tls.key, and ca.crt for mutual TLS
	// between nodes) valid for every pod's DNS name.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// CertManager has cert-manager issue the certificate into a Secret the operator names.
	// +optional
	CertManager *CertManagerTLS `json:"certManager,omitempty"`
}

// CertManagerTLS is a cert-manager Certificate request.
type CertManagerTLS struct {
	// IssuerRef is the cert-manager issuer that signs the brokers' certificate.
	IssuerRef IssuerReference `json:"issuerRef"`
}

// IssuerReference names a cert-manager Issuer or ClusterIssuer.
type IssuerReference struct {
	// Name of the issuer.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Kind of the issuer.
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +kubebuilder:default=Issuer
	// +optional
	Kind string `json:"kind,omitempty"`

	// Group of the issuer.
	// +kubebuilder:default="cert-manager.io"
	// +optional
	Group string `json:"group,omitempty"`
}

// ServiceSpec shapes the client Service in front of every ready broker.
type ServiceSpec struct {
	// Type of the client Service.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations added to the client Service.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MonitoringSpec turns on Prometheus scraping of the brokers' /metrics.
// +kubebuilder:validation:XValidation:rule="!has(self.interval) || !has(self.scrapeTimeout) || duration(self.scrapeTimeout) <= duration(self.interval)",message="scrapeTimeout must not exceed interval"
type MonitoringSpec struct {
	// ServiceMonitor creates a prometheus-operator ServiceMonitor for the brokers when that CRD
	// is installed; without it the operator reports the reason in an event.
	// +optional
	ServiceMonitor bool `json:"serviceMonitor,omitempty"`

	// Labels added to the ServiceMonitor, besides the cluster's own (which win on a clash).
	// A Prometheus of kube-prometheus-stack only picks up ServiceMonitors whose labels match
	// its serviceMonitorSelector, by default `release: <its Helm release name>`.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Interval between two scrapes of each broker, a duration such as 30s or 1m; empty keeps
	// the Prometheus's own scrape interval.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +optional
	Interval string `json:"interval,omitempty"`

	// ScrapeTimeout bounds one scrape of a broker (at most Interval); empty keeps the
	// Prometheus's own scrape timeout.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +optional
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
}

// NaradClusterStatus is what the operator last observed of the cluster.
type NaradClusterStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Progressing, Degraded, Draining, Rebalancing, UnderReplicated.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Replicas is the StatefulSet's current replica count (it trails spec.replicas while a
	// scale-down drains).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of ready broker pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of the broker pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Leader is the node ID of the Raft leader; empty when none is known.
	// +optional
	Leader string `json:"leader,omitempty"`

	// Members are the brokers' cluster members (GET /v1/cluster/members), sorted by node ID.
	// +optional
	Members []MemberStatus `json:"members,omitempty"`

	// Moves are the partition moves in flight (GET /v1/cluster/moves).
	// +optional
	Moves MovesStatus `json:"moves,omitempty"`

	// Draining has one entry per decommissioning node.
	// +optional
	Draining []DrainingNodeStatus `json:"draining,omitempty"`

	// VolumeLoss lists the brokers whose data volume the operator found lost, one entry per
	// pod, until the pod runs again (see spec.storage.onVolumeLoss).
	// +optional
	VolumeLoss []LostVolume `json:"volumeLoss,omitempty"`

	// ScalePreview answers the latest narad.dev/scale-preview annotation: what the brokers would
	// do to scale to a replica count, computed with decommission dry runs, changing nothing.
	// +optional
	ScalePreview *ScalePreview `json:"scalePreview,omitempty"`

	// Replication is the replication defaults in use and the partitions the brokers report
	// under-replicated (GET /v1/cluster/partitions?under_replicated=true).
	// +optional
	Replication *ReplicationStatus `json:"replication,omitempty"`

	// Version is the broker image tag every broker pod runs; while a rolling update has pods
	// on two images it keeps the version they all ran before.
	// +optional
	Version string `json:"version,omitempty"`

	// Storage is the size of the brokers' data volumes (spec.storage.size growth).
	// +optional
	Storage *StorageStatus `json:"storage,omitempty"`
}

// StorageStatus is what the operator did to the brokers' data volumes. The StatefulSet's
// claim template cannot change, so it keeps the size the cluster was created with; the
// operator patches each claim instead, new claims included.
type StorageStatus struct {
	// TemplateSize is the size in the StatefulSet's claim template (the size at creation).
	// +optional
	TemplateSize string `json:"templateSize,omitempty"`
	// Size is the size the operator has asked of every broker claim: spec.storage.size once
	// the StorageClass allowed the expansion.
	// +optional
	Size string `json:"size,omitempty"`
	// Resizing lists the claims whose volume has not reached Size yet.
	// +optional
	Resizing []string `json:"resizing,omitempty"`
}

// ReplicationStatus is the cluster's replication as the operator last saw it.
type ReplicationStatus struct {
	// DefaultReplicationFactor is the --default-replication-factor the brokers were given
	// (spec.topicDefaults.replicationFactor, or the default that follows spec.replicas).
	DefaultReplicationFactor int32 `json:"defaultReplicationFactor"`
	// DefaultMinInSyncReplicas is the --default-min-insync-replicas the brokers were given; 0
	// means min(2, R) per topic.
	// +optional
	DefaultMinInSyncReplicas int32 `json:"defaultMinInSyncReplicas,omitempty"`
	// UnderReplicatedPartitions counts partitions with fewer in-sync replicas than their
	// replication factor, or no leader.
	// +optional
	UnderReplicatedPartitions int32 `json:"underReplicatedPartitions"`
	// UnderMinInSyncPartitions counts partitions with fewer in-sync replicas than their
	// min_insync_replicas: they refuse produce with 503 not_enough_replicas.
	// +optional
	UnderMinInSyncPartitions int32 `json:"underMinInSyncPartitions"`
}

// ScalePreview is the dry run of scaling a cluster to Replicas.
type ScalePreview struct {
	// Request echoes the narad.dev/scale-preview annotation value this preview answers.
	Request string `json:"request"`
	// Replicas is the replica count previewed.
	Replicas int32 `json:"replicas"`
	// Allowed is false when the brokers would refuse to remove one of the nodes.
	Allowed bool `json:"allowed"`
	// Error is set when the preview could not be computed (no broker answered, for example).
	// +optional
	Error string `json:"error,omitempty"`
	// ObservedAt is when the operator computed the preview.
	ObservedAt metav1.Time `json:"observedAt"`
	// Nodes has one entry per node a scale-down would decommission, highest ordinal first.
	// +optional
	Nodes []NodePreview `json:"nodes,omitempty"`
}

// NodePreview is the brokers' dry-run verdict for decommissioning one node.
type NodePreview struct {
	// NodeID of the broker.
	NodeID string `json:"nodeID"`
	// Allowed is the brokers' verdict.
	Allowed bool `json:"allowed"`
	// Reasons are the brokers' reason codes (min_voters, no_live_majority, no_receivers,
	// dead_owner, ...).
	// +optional
	Reasons []string `json:"reasons,omitempty"`
	// Moves are the partition moves the brokers would plan to drain the node, as things stand
	// now; later nodes are planned again when their turn comes.
	// +optional
	Moves []PlannedMove `json:"moves,omitempty"`
}

// PlannedMove is one partition move a plan would start.
type PlannedMove struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// MemberStatus is one broker as the cluster sees it.
type MemberStatus struct {
	// Pod running this node; empty for a member with no pod (for example one scaled away).
	// +optional
	Pod string `json:"pod,omitempty"`
	// NodeID of the member.
	NodeID string `json:"nodeID"`
	// RaftRole: voter, nonvoter or none (removed from the Raft configuration).
	// +optional
	RaftRole string `json:"raftRole,omitempty"`
	// Status: alive, dead or draining.
	// +optional
	Status string `json:"status,omitempty"`
	// OwnedPartitions is the number of partitions this node owns.
	// +optional
	OwnedPartitions int32 `json:"ownedPartitions,omitempty"`
	// Draining is the decommission flag.
	// +optional
	Draining bool `json:"draining,omitempty"`
}

// MovesStatus summarises partition moves.
type MovesStatus struct {
	// InFlight is the number of partitions with a move target.
	// +optional
	InFlight int32 `json:"inFlight,omitempty"`
	// Blocked lists the moves that cannot progress, with the brokers' reasons.
	// +optional
	Blocked []BlockedMove `json:"blocked,omitempty"`
}

// BlockedMove is a partition move that cannot progress right now.
type BlockedMove struct {
	// Topic of the partition.
	Topic string `json:"topic"`
	// Partition index.
	Partition int32 `json:"partition"`
	// From is the current owner.
	From string `json:"from"`
	// To is the move's destination.
	To string `json:"to"`
	// Reasons are the brokers' codes: source_dead, target_dead, target_not_member, …
	// +optional
	Reasons []string `json:"reasons,omitempty"`
}

// DrainingNodeStatus is the progress of one node's decommission.
type DrainingNodeStatus struct {
	// NodeID of the draining node.
	NodeID string `json:"nodeID"`
	// PartitionsLeft is how many partitions the node still owns.
	// +optional
	PartitionsLeft int32 `json:"partitionsLeft,omitempty"`
	// BytesLeft is the data still to copy off the node, in bytes.
	// +optional
	BytesLeft int64 `json:"bytesLeft,omitempty"`
	// StartedAt is when the operator started the node's decommission.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// PartitionsAtStart and BytesAtStart are what the node owned when its decommission
	// started; with the values left they give the drain's progress.
	// +optional
	PartitionsAtStart int32 `json:"partitionsAtStart,omitempty"`
	// +optional
	BytesAtStart int64 `json:"bytesAtStart,omitempty"`
	// ETA is when the drain is expected to finish at the recent copy rate; absent when unknown.
	// +optional
	ETA *metav1.Time `json:"eta,omitempty"`
	// BlockedReasons are the brokers' decommission_blocked codes (for example leader_transfer).
	// +optional
	BlockedReasons []string `json:"blockedReasons,omitempty"`
}

// NaradCluster is a Narad broker cluster: a StatefulSet of brokers with its Services, Secrets,
// configuration and PodDisruptionBudget.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=nc,categories=narad
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Moves",type=integer,JSONPath=`.status.moves.inFlight`
// +kubebuilder:printcolumn:name="UnderReplicated",type=integer,JSONPath=`.status.replication.underReplicatedPartitions`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NaradCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	// +optional
	Spec   NaradClusterSpec   `json:"spec"`
	Status NaradClusterStatus `json:"status,omitempty"`
}

// NaradClusterList is a list of NaradClusters.
//
// +kubebuilder:object:root=true
type NaradClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NaradCluster `json:"items"`
}
