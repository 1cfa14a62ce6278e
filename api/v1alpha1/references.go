package v1alpha1

// ClusterReference names a NaradCluster in the namespace of the referring object.
type ClusterReference struct {
	// Name of the NaradCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretReference names a Secret in the namespace of the NaradCluster. The key read from it is
// fixed by the field that holds the reference.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Keys of the security Secret (docs/kubernetes.md#create-a-cluster). A generated Secret holds both.
const (
	// ClusterSecretKey holds the shared secret that authenticates node-to-node calls.
	ClusterSecretKey = "cluster-secret"
	// AdminPasswordKey holds the root admin's password (at most 72 bytes).
	AdminPasswordKey = "admin-password"
)
