package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// UsernamePattern is the brokers' username rule (docs/internals/http-api.md §1.7).
const UsernamePattern = `^[A-Za-z0-9._-]{1,64}$`

// Keys of the Secret the operator generates for a NaradUser without spec.passwordSecretRef
// (docs/kubernetes.md#users). They match the default keys of a remote FanoutLink's
// credentialsSecretRef, so the Secret can be named there as it is.
const (
	// UserSecretUsernameKey holds the broker username.
	UserSecretUsernameKey = "username"
	// UserSecretPasswordKey holds the password; it is also the default key of
	// spec.passwordSecretRef.
	UserSecretPasswordKey = "password"
	// UserSecretURLKey holds the base URL of the cluster's client Service
	// (scheme://<cluster>.<namespace>.svc:7942), without credentials.
	UserSecretURLKey = "url"
)

// UserSecretSuffix ends the name of a NaradUser's generated Secret: "<metadata.name>-narad-user".
const UserSecretSuffix = "-narad-user"

// GrantAction is what a grant allows (docs/internals/http-api.md §1.3).
// +kubebuilder:validation:Enum=produce;consume;create;admin
type GrantAction string

const (
	// GrantProduce allows producing to the topics the patterns match.
	GrantProduce GrantAction = "produce"
	// GrantConsume allows consuming (and acking) from the topics the patterns match.
	GrantConsume GrantAction = "consume"
	// GrantCreate allows creating topics whose names the patterns match.
	GrantCreate GrantAction = "create"
	// GrantAdmin allows everything, user management included; it takes no patterns.
	GrantAdmin GrantAction = "admin"
)

// UserGrant is one grant of the brokers' grant model (docs/internals/http-api.md §1.3): an
// action and the topic-name patterns it covers. A pattern ending in '*' matches by prefix
// ("orders-*"; "*" alone matches every topic), any other pattern matches one name exactly.
//
// +kubebuilder:validation:XValidation:rule="self.action == 'admin' ? (!has(self.patterns) || size(self.patterns) == 0) : (has(self.patterns) && size(self.patterns) > 0)",message="admin takes no patterns; produce, consume and create need at least one"
type UserGrant struct {
	// Action: produce, consume, create or admin.
	Action GrantAction `json:"action"`

	// Patterns of topic names the action covers: 1 … 255 name characters (A-Z a-z 0-9 . _ -)
	// with an optional trailing '*', or "*" alone. Required except for admin.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9._-]{0,255}\*?$`
	// +optional
	Patterns []string `json:"patterns,omitempty"`
}

// PasswordSecretReference names a Secret in the NaradUser's namespace and the key holding the
// user's password.
type PasswordSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Key of the password in the Secret: 1 … 72 bytes (the brokers refuse longer ones).
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// NaradUserSpec is the desired state of a broker user (POST /v1/users, PUT
// /v1/users/{u}/grants and /password; docs/internals/http-api.md §2.15).
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.username) || (has(self.username) && self.username == oldSelf.username)",message="username is immutable once set"
type NaradUserSpec struct {
	// ClusterRef is the NaradCluster the user lives on. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterRef is immutable"
	ClusterRef ClusterReference `json:"clusterRef"`

	// Username on the brokers. Empty means metadata.name (the operator writes it back);
	// immutable once set. "admin" is the root admin the operator itself acts as, and is
	// refused.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]{1,64}$`
	// +optional
	Username string `json:"username,omitempty"`

	// Grants replace the user's grants on the brokers; a grant changed on the brokers by hand
	// is set back on the next resync. Empty: a user that can only authenticate and read.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Grants []UserGrant `json:"grants,omitempty"`

	// PasswordSecretRef takes the password from a Secret you manage; a change of that
	// Secret's key is applied to the brokers. Absent: the operator generates a password into
	// the Secret "<metadata.name>-narad-user" (keys username, password, url) and generates a
	// new one whenever that Secret is deleted.
	// +optional
	PasswordSecretRef *PasswordSecretReference `json:"passwordSecretRef,omitempty"`
}

// NaradUserStatus is what the operator last did with the broker user.
type NaradUserStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, with the reason of a failure (ClusterNotFound, BrokersUnreachable,
	// PasswordSecretNotFound, PasswordInvalid, SecretConflict, GrantsRejected, …).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Username is the broker username the operator manages.
	// +optional
	Username string `json:"username,omitempty"`

	// SecretName is the Secret holding the password: the generated one, or
	// spec.passwordSecretRef.name.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// PasswordSecretVersion identifies the Secret version ("<uid>/<resourceVersion>") whose
	// password the brokers were last given; another version is applied on the next pass. It
	// never holds the password or anything derived from it.
	// +optional
	PasswordSecretVersion string `json:"passwordSecretVersion,omitempty"`
}

// NaradUser is a broker user, created, kept in line with its grants and deleted through the
// brokers' admin API, with its password in a Secret.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=nu,categories=narad
// +kubebuilder:validation:XValidation:rule="(has(self.spec.username) ? self.spec.username : self.metadata.name) != 'admin'",message="the root admin cannot be a NaradUser"
// +kubebuilder:validation:XValidation:rule="has(self.spec.username) || size(self.metadata.name) <= 64",message="metadata.name longer than 64 characters needs spec.username"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 242",message="metadata.name must be at most 242 characters (the generated Secret is <name>-narad-user)"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Username",type=string,JSONPath=`.status.username`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NaradUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NaradUserSpec   `json:"spec"`
	Status NaradUserStatus `json:"status,omitempty"`
}

// NaradUserList is a list of NaradUsers.
//
// +kubebuilder:object:root=true
type NaradUserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NaradUser `json:"items"`
}

// BrokerUsername is the username the user has on the brokers: spec.username, or metadata.name
// until the operator has written it back.
func (u *NaradUser) BrokerUsername() string {
	if u.Spec.Username != "" {
		return u.Spec.Username
	}
	return u.Name
}

// GeneratedSecretName is the name of the Secret the operator generates the password into.
func (u *NaradUser) GeneratedSecretName() string { return u.Name + UserSecretSuffix }
