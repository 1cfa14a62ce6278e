package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Sizes of the generated secret values, in random bytes.
const (
	clusterSecretBytes = 32 // hex-encoded: 64 characters
	adminPasswordBytes = 24 // base64url: 32 characters (the brokers accept at most 72 bytes)
)

// Ready reasons that stop the operator from touching the StatefulSet until they clear.
const (
	ReasonSecretMissing      = "SecretMissing"
	ReasonCertManagerMissing = "CertManagerMissing"
	ReasonCertificatePending = "CertificatePending"
)

// blocker is why the StatefulSet cannot be applied now; it becomes the Ready condition.
type blocker struct {
	Reason, Message string
}

// errCacheLag is returned when the generated Secret exists on the server but not yet in the
// informer cache; the reconcile is retried shortly.
var errCacheLag = fmt.Errorf("generated secret not in the cache yet")

// usesGeneratedSecret reports whether spec.security leaves a secret to the operator.
func usesGeneratedSecret(nc *naradv1.NaradCluster) bool {
	return nc.Spec.Security.AdminSecretRef == nil || nc.Spec.Security.ClusterSecretRef == nil
}

// ensureGeneratedSecret creates naming.GeneratedSecret once, with random values. An existing
// Secret keeps its values forever: only keys it lacks are filled in, and only when the
// NaradCluster controls it (a Secret someone else made is never touched). It returns the
// Secret as written, which the informer cache may not hold yet.
func (r *Reconciler) ensureGeneratedSecret(ctx context.Context, nc *naradv1.NaradCluster) (*corev1.Secret, error) {
	var sec corev1.Secret
	key := types.NamespacedName{Namespace: nc.Namespace, Name: naming.GeneratedSecret(nc)}
	found, err := r.exists(ctx, key, &sec)
	if err != nil {
		return nil, err
	}
	if !found {
		data, err := generatedValues(nil)
		if err != nil {
			return nil, err
		}
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: naming.Labels(nc)},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if err := controllerutil.SetControllerReference(nc, &sec, r.Scheme); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, &sec); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, errCacheLag
			}
			return nil, fmt.Errorf("create secret %s: %w", key, err)
		}
		r.event(nc, corev1.EventTypeNormal, "Created", "Create", "Created Secret %s with generated %s and %s",
			key.Name, naradv1.ClusterSecretKey, naradv1.AdminPasswordKey)
		return &sec, nil
	}
	if !metav1.IsControlledBy(&sec, nc) {
		return &sec, nil
	}
	data, err := generatedValues(sec.Data)
	if err != nil || len(data) == len(sec.Data) {
		return &sec, err
	}
	sec.Data = data
	if err := r.Client.Update(ctx, &sec); err != nil {
		return nil, fmt.Errorf("fill in secret %s: %w", key, err)
	}
	r.event(nc, corev1.EventTypeNormal, "Updated", "Update", "Filled in missing keys of Secret %s", key.Name)
	return &sec, nil
}

// generatedValues returns have plus a random value for each generated key it lacks.
func generatedValues(have map[string][]byte) (map[string][]byte, error) {
	out := make(map[string][]byte, len(have)+2)
	for k, v := range have {
		out[k] = v
	}
	if len(out[naradv1.ClusterSecretKey]) == 0 {
		b := make([]byte, clusterSecretBytes)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		out[naradv1.ClusterSecretKey] = []byte(hex.EncodeToString(b))
	}
	if len(out[naradv1.AdminPasswordKey]) == 0 {
		b := make([]byte, adminPasswordBytes)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		out[naradv1.AdminPasswordKey] = []byte(base64.RawURLEncoding.EncodeToString(b))
	}
	return out, nil
}

// secretNeed is a Secret the pods mount and the keys it must have.
type secretNeed struct {
	name string
	keys []string
	// pending is the Ready reason while it is missing (SecretMissing unless cert-manager
	// is still to issue it).
	pending string
}

func secretNeeds(nc *naradv1.NaradCluster) []secretNeed {
	needs := []secretNeed{
		{naming.ClusterSecret(nc), []string{naradv1.ClusterSecretKey}, ReasonSecretMissing},
		{naming.AdminSecret(nc), []string{naradv1.AdminPasswordKey}, ReasonSecretMissing},
	}
	if name := naming.TLSSecret(nc); name != "" {
		reason := ReasonSecretMissing
		if nc.Spec.TLS.CertManager != nil {
			reason = ReasonCertificatePending
		}
		needs = append(needs, secretNeed{name, []string{tlsCertKey, tlsKeyKey, tlsCAKey}, reason})
	}
	return needs
}

// checkSecrets reads every Secret the pods mount (known ones, just written, as given). It
// returns their "name@resourceVersion" (for the config hash), or the blocker naming what is
// missing.
func (r *Reconciler) checkSecrets(ctx context.Context, nc *naradv1.NaradCluster, known *corev1.Secret) ([]string, *blocker, error) {
	var versions []string
	for _, need := range mergeNeeds(secretNeeds(nc)) {
		var sec corev1.Secret
		found := known != nil && known.Name == need.name
		if found {
			sec = *known
		} else {
			var err error
			if found, err = r.exists(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: need.name}, &sec); err != nil {
				return nil, nil, err
			}
		}
		if !found {
			return nil, &blocker{need.pending, fmt.Sprintf("Secret %s not found", need.name)}, nil
		}
		var missing []string
		for _, k := range need.keys {
			if len(sec.Data[k]) == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return nil, &blocker{need.pending, fmt.Sprintf("Secret %s lacks key(s) %s", need.name, strings.Join(missing, ", "))}, nil
		}
		versions = append(versions, need.name+"@"+sec.ResourceVersion)
	}
	return versions, nil, nil
}

// mergeNeeds folds needs of the same Secret into one (the generated Secret holds both keys).
func mergeNeeds(needs []secretNeed) []secretNeed {
	var out []secretNeed
	idx := map[string]int{}
	for _, n := range needs {
		if i, ok := idx[n.name]; ok {
			out[i].keys = append(out[i].keys, n.keys...)
			continue
		}
		idx[n.name] = len(out)
		out = append(out, secretNeed{n.name, append([]string(nil), n.keys...), n.pending})
	}
	return out
}
