package v1alpha1

// Condition types set in the status of the kinds of this package. Every condition carries the
// observedGeneration of the spec it judged.
const (
	// ConditionReady is True when the object's broker-side state matches its spec: for a
	// NaradCluster, every replica is ready and the cluster has a Raft leader.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the operator is changing something towards the spec
	// (creating pods, rolling them, growing or shrinking the StatefulSet).
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the spec cannot be reached as things stand, for example a
	// scale-down the brokers refuse; its message carries the brokers' reason codes.
	ConditionDegraded = "Degraded"
	// ConditionDraining is True on a NaradCluster while at least one node is decommissioning.
	ConditionDraining = "Draining"
	// ConditionRebalancing is True on a NaradCluster while partition moves are in flight.
	ConditionRebalancing = "Rebalancing"
	// ConditionUnderReplicated is True on a NaradCluster or Topic while some of its partitions
	// have fewer in-sync replicas than their replication factor (or no leader); the message
	// and the status give how many, and how many are below min_insync_replicas.
	ConditionUnderReplicated = "UnderReplicated"
	// ConditionReconcilePaused is True while the object carries PauseReconcileAnnotation
	// "true": the operator changes nothing for it (deletion included) until it is removed.
	ConditionReconcilePaused = "ReconcilePaused"
	// ConditionVolumesResizing is True on a NaradCluster while broker claims are being expanded
	// to spec.storage.size; False with reason ExpansionNotAllowed when the StorageClass does not
	// allow it (nothing is patched then).
	ConditionVolumesResizing = "VolumesResizing"
)

// PauseReconcileAnnotation set to "true" on a NaradCluster, Topic or FanoutLink stops the
// operator from acting on it; the ReconcilePaused condition says so.
const PauseReconcileAnnotation = "narad.dev/pause-reconcile"

// Finalizers the operator puts on the objects it must clean up after on the brokers. Removing
// one by hand skips that cleanup.
const (
	// TopicFinalizer holds a Topic until the broker topic is deleted (deletionPolicy Delete) or
	// left in place (Retain).
	TopicFinalizer = "narad.dev/topic-finalizer"
	// FanoutLinkFinalizer holds a FanoutLink until the link is detached on the brokers.
	FanoutLinkFinalizer = "narad.dev/fanoutlink-finalizer"
	// NaradUserFinalizer holds a NaradUser until its broker user is deleted (or its cluster is
	// gone).
	NaradUserFinalizer = "narad.dev/naraduser-finalizer"
	// NaradClusterFinalizer holds a NaradCluster while Topics, FanoutLinks or NaradUsers still reference it,
	// so their finalizers can still reach the brokers.
	NaradClusterFinalizer = "narad.dev/cluster-finalizer"
)
