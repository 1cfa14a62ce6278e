// Package controller holds the operator's controllers, one subpackage per kind (cluster, topic,
// fanoutlink, user). This file owns the permissions they need, as kubebuilder RBAC markers:
// hack/manifests.sh runs controller-gen on this package alone (it imports nothing, so it loads
// without the operator's dependencies) to write the ClusterRole manager-role in
// config/rbac/role.yaml, which the Helm chart's ClusterRole must equal (test/helm checks it).
// A controller that starts using a new kind or verb adds the marker here.
package controller

// The three kinds, their status and their finalizers (the Topic and FanoutLink finalizers delete
// the broker-side objects; ownerReferences with blockOwnerDeletion need update on finalizers).
// +kubebuilder:rbac:groups=narad.dev,resources=naradclusters;topics;fanoutlinks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=narad.dev,resources=naradclusters/status;topics/status;fanoutlinks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=narad.dev,resources=naradclusters/finalizers;topics/finalizers;fanoutlinks/finalizers,verbs=update

// NaradUsers (docs/kubernetes.md#users): the object, its status and its finalizer, which
// deletes the broker user. Their generated Secrets fall under the secrets rule below.
// +kubebuilder:rbac:groups=narad.dev,resources=naradusers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=narad.dev,resources=naradusers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=narad.dev,resources=naradusers/finalizers,verbs=update

// What a NaradCluster owns: the StatefulSet, the headless and client Services, the broker
// ConfigMap, the generated Secret (and the referenced ones it reads) and the PodDisruptionBudget.
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// Pods are rolled one at a time by deleting them (the StatefulSet is OnDelete); the PVC of a
// decommissioned ordinal is deleted when spec.storage.pvcRetentionOnScaleDown is Delete, and
// every broker's PVC is patched to a larger spec.storage.size when its StorageClass, which is
// read for that, allows volume expansion.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Rack awareness (docs/kubernetes.md, "Racks and placement"): each cluster's pods run as a
// ServiceAccount the operator creates, bound (one ClusterRoleBinding per cluster) to the rack
// ClusterRole installed with the operator (chart or config/rbac), which lets their init
// container read its Node. Granting get on nodes needs the operator to hold it; the operator
// creates no ClusterRole.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;list;watch;create;update;patch;delete

// Events, through either the core or the events.k8s.io recorder.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Optional integrations, used only when their CRDs are installed: a ServiceMonitor for
// spec.monitoring and a cert-manager Certificate for spec.tls.certManager. The CRDs themselves
// are read to find out whether they are.
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Volume loss (spec.storage.onVolumeLoss): a broker's PersistentVolume and the node a local
// volume is pinned to are read to tell a lost volume from a pod that is merely starting.
// +kubebuilder:rbac:groups="",resources=persistentvolumes;nodes,verbs=get;list;watch
