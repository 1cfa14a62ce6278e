// Package naming holds the names, labels, ports and paths the operator gives the objects of a
// NaradCluster. Every part of the operator, the kubectl plugin and the test pod runner derive
// them from here, so they always agree.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/release"
)

// Ports and paths of the broker container (docs/operating.md#ports).
const (
	HTTPPort               = 7942
	ClusterPort            = 7943
	HTTPPortName           = "http"
	ClusterPortName        = "cluster"
	ContainerName          = "narad"
	DataVolume             = "data"
	DataMountPath          = "/var/lib/narad"
	DataDir                = DataMountPath + "/data"
	ClusterSecretMountPath = "/etc/narad/cluster-secret"
	AdminSecretMountPath   = "/etc/narad/admin-secret"
	TLSMountPath           = "/etc/narad/tls"
	ConfigMountPath        = "/etc/narad/config"
	ConfigFileName         = "narad.yaml"
	// AdminUser is the root admin the brokers seed at first start; the operator acts as it.
	AdminUser = "admin"
	// DefaultImage is the broker image used when spec.image is empty: the broker of the
	// operator's own release (never latest).
	DefaultImage = release.BrokerImage
)

// Labels put on every object of a cluster; Selector is the subset that selects its pods.
const (
	LabelName       = "app.kubernetes.io/name"
	LabelInstance   = "app.kubernetes.io/instance"
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelComponent  = "app.kubernetes.io/component"
	AppName         = "narad"
	ManagedBy       = "narad-operator"
	ComponentBroker = "broker"
)

// Labels returns the labels of every object owned by nc.
func Labels(nc *naradv1.NaradCluster) map[string]string {
	return map[string]string{LabelName: AppName, LabelInstance: nc.Name, LabelManagedBy: ManagedBy,
		LabelComponent: ComponentBroker}
}

// Selector returns the labels selecting nc's broker pods.
func Selector(nc *naradv1.NaradCluster) map[string]string {
	return map[string]string{LabelName: AppName, LabelInstance: nc.Name}
}

// StatefulSet is the name of nc's StatefulSet (and the prefix of its pod names).
func StatefulSet(nc *naradv1.NaradCluster) string { return nc.Name }

// HeadlessService gives every pod a stable DNS name.
func HeadlessService(nc *naradv1.NaradCluster) string { return nc.Name + "-headless" }

// ClientService load-balances the client API over ready pods.
func ClientService(nc *naradv1.NaradCluster) string { return nc.Name }

// ConfigMap holds the brokers' configuration file.
func ConfigMap(nc *naradv1.NaradCluster) string { return nc.Name + "-config" }

// PodDisruptionBudget keeps a Raft quorum through voluntary disruptions.
func PodDisruptionBudget(nc *naradv1.NaradCluster) string { return nc.Name }

// ServiceMonitor scrapes every pod's /metrics.
func ServiceMonitor(nc *naradv1.NaradCluster) string { return nc.Name }

// GeneratedSecret is the Secret the operator creates when spec.security leaves a secret
// unset; it holds the keys naradv1.ClusterSecretKey and naradv1.AdminPasswordKey.
func GeneratedSecret(nc *naradv1.NaradCluster) string { return nc.Name + "-security" }

// AdminSecret is the Secret holding the admin password (key naradv1.AdminPasswordKey).
func AdminSecret(nc *naradv1.NaradCluster) string {
	if r := nc.Spec.Security.AdminSecretRef; r != nil {
		return r.Name
	}
	return GeneratedSecret(nc)
}

// ClusterSecret is the Secret holding the cluster secret (key naradv1.ClusterSecretKey).
func ClusterSecret(nc *naradv1.NaradCluster) string {
	if r := nc.Spec.Security.ClusterSecretRef; r != nil {
		return r.Name
	}
	return GeneratedSecret(nc)
}

// TLSEnabled reports whether the brokers serve TLS: spec.tls names a Secret or a cert-manager
// issuer (an empty tls object leaves TLS off).
func TLSEnabled(nc *naradv1.NaradCluster) bool {
	t := nc.Spec.TLS
	return t != nil && (t.SecretName != "" || t.CertManager != nil)
}

// TLSSecret is the kubernetes.io/tls Secret with the brokers' certificate: spec.tls.secretName,
// or the one cert-manager fills for the Certificate the operator requests. Empty without TLS.
func TLSSecret(nc *naradv1.NaradCluster) string {
	switch {
	case !TLSEnabled(nc):
		return ""
	case nc.Spec.TLS.SecretName != "":
		return nc.Spec.TLS.SecretName
	default:
		return nc.Name + "-tls"
	}
}

// Certificate is the cert-manager Certificate requested with spec.tls.certManager.
func Certificate(nc *naradv1.NaradCluster) string { return nc.Name + "-tls" }

// PodName is the pod of ordinal i; it is also the broker's node ID.
func PodName(nc *naradv1.NaradCluster, ordinal int32) string {
	return fmt.Sprintf("%s-%d", StatefulSet(nc), ordinal)
}

// NodeID is the broker node ID of ordinal i (the pod name).
func NodeID(nc *naradv1.NaradCluster, ordinal int32) string { return PodName(nc, ordinal) }

// Ordinal parses a node ID (or pod name) of nc back into its ordinal.
func Ordinal(nc *naradv1.NaradCluster, nodeID string) (int32, bool) {
	rest, ok := strings.CutPrefix(nodeID, StatefulSet(nc)+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') ||
		strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// PVC is the data PersistentVolumeClaim of ordinal i (volumeClaimTemplate DataVolume).
func PVC(nc *naradv1.NaradCluster, ordinal int32) string {
	return DataVolume + "-" + PodName(nc, ordinal)
}

// PodHost is the stable DNS name of ordinal i through the headless Service.
func PodHost(nc *naradv1.NaradCluster, ordinal int32) string {
	return fmt.Sprintf("%s.%s.%s.svc", PodName(nc, ordinal), HeadlessService(nc), nc.Namespace)
}

// Scheme is "https" when the brokers serve TLS, else "http".
func Scheme(nc *naradv1.NaradCluster) string {
	if TLSEnabled(nc) {
		return "https"
	}
	return "http"
}

// Annotations the kubectl plugin writes on a NaradCluster to ask the operator for something it
// answers in status (the plugin reaches only the Kubernetes API, never the pods).
const (
	// ScalePreviewAnnotation asks for a dry run of scaling to a replica count. Its value is
	// "<replicas>/<request id>"; the operator answers in status.scalePreview with the same value
	// in its request field.
	ScalePreviewAnnotation = "narad.dev/scale-preview"
	// RestartedAtAnnotation on the pod template rolls every pod (one at a time, the Raft leader
	// last); the plugin and users set it to a timestamp.
	RestartedAtAnnotation = "narad.dev/restartedAt"
)

// ParseScalePreview reads the replica count of a ScalePreviewAnnotation value,
// "<replicas>/<request id>": a whole number of at least 1 and a non-empty request id.
func ParseScalePreview(v string) (int32, error) {
	n, id, ok := strings.Cut(v, "/")
	if !ok || id == "" {
		return 0, fmt.Errorf("annotation %s=%q is not <replicas>/<request id>", ScalePreviewAnnotation, v)
	}
	replicas, err := strconv.ParseInt(n, 10, 32)
	if err != nil || replicas < 1 {
		return 0, fmt.Errorf("annotation %s=%q: replicas must be a whole number of at least 1", ScalePreviewAnnotation, v)
	}
	return int32(replicas), nil
}

// MaxRackLen is the broker's limit on a rack name (--rack).
const MaxRackLen = 64

// RackName turns s into a rack name the broker accepts (1-64 characters of A-Z a-z 0-9 . _ -):
// other characters become '-', and a longer name keeps its first 55 characters and a hash of
// the whole, so two long names stay distinct. "" stays "" (no rack).
func RackName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '-'
		}
	}
	if len(b) <= MaxRackLen {
		return string(b)
	}
	sum := sha256.Sum256([]byte(s))
	return string(b[:MaxRackLen-9]) + "-" + hex.EncodeToString(sum[:4])
}
