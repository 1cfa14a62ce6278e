package user

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// maxPasswordLen is the brokers' password limit in bytes (docs/internals/http-api.md §1.7):
// bcrypt ignores what follows, so the brokers refuse a longer one.
const maxPasswordLen = 72

// source is where a pass takes the password from.
type source struct {
	secretName string
	password   string // empty when rotate
	version    string // versionOf the Secret read; empty when rotate
	// rotate: the generated Secret is missing or holds no usable password, so a new password
	// is generated, given to the brokers and then written to the Secret.
	rotate   bool
	existing *corev1.Secret // the generated Secret to overwrite on rotation; nil to create it
}

// passwordSource reads the Secret the password comes from. It returns nil, with a condition
// in st, when that Secret is unusable as it stands.
func (r *Reconciler) passwordSource(ctx context.Context, u *naradv1.NaradUser, nc *naradv1.NaradCluster, st *status) (*source, error) {
	if ref := u.Spec.PasswordSecretRef; ref != nil {
		if err := r.dropGenerated(ctx, u); err != nil {
			return nil, err
		}
		return r.referenced(ctx, u, ref, st)
	}
	return r.generated(ctx, u, nc, st)
}

// referenced reads the password from spec.passwordSecretRef.
func (r *Reconciler) referenced(ctx context.Context, u *naradv1.NaradUser, ref *naradv1.PasswordSecretReference, st *status) (*source, error) {
	key := ref.Key
	if key == "" {
		key = naradv1.UserSecretPasswordKey
	}
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, secretKey(u, ref.Name), &sec)
	switch {
	case apierrors.IsNotFound(err):
		st.fail("PasswordSecretNotFound", fmt.Sprintf("Secret %q (spec.passwordSecretRef) not found", ref.Name))
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read Secret %s: %w", ref.Name, err)
	}
	pw, ok := sec.Data[key]
	if !ok {
		st.fail("PasswordKeyMissing", fmt.Sprintf("Secret %q has no key %q", ref.Name, key))
		return nil, nil
	}
	if msg := checkPassword(pw); msg != "" {
		st.fail("PasswordInvalid", fmt.Sprintf("Secret %q key %q: %s", ref.Name, key, msg))
		return nil, nil
	}
	return &source{secretName: ref.Name, password: string(pw), version: versionOf(&sec)}, nil
}

// generated reads the generated Secret, keeping its username and url keys right. A missing
// Secret, or one without a usable password, asks for a rotation.
func (r *Reconciler) generated(ctx context.Context, u *naradv1.NaradUser, nc *naradv1.NaradCluster, st *status) (*source, error) {
	name := u.GeneratedSecretName()
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, secretKey(u, name), &sec)
	switch {
	case apierrors.IsNotFound(err):
		return &source{secretName: name, rotate: true}, nil
	case err != nil:
		return nil, fmt.Errorf("read Secret %s: %w", name, err)
	case !metav1.IsControlledBy(&sec, u):
		st.fail("SecretConflict", fmt.Sprintf("Secret %q exists and is not owned by this NaradUser: delete it, or set spec.passwordSecretRef", name))
		return nil, nil
	}
	pw := sec.Data[naradv1.UserSecretPasswordKey]
	if checkPassword(pw) != "" {
		return &source{secretName: name, rotate: true, existing: &sec}, nil
	}
	if want := secretData(u, nc, string(pw)); !maps.EqualFunc(sec.Data, want, bytes.Equal) {
		sec.Data = want
		if err := r.Client.Update(ctx, &sec); err != nil {
			return nil, fmt.Errorf("update Secret %s: %w", name, err)
		}
	}
	return &source{secretName: name, password: string(pw), version: versionOf(&sec)}, nil
}

// rotate generates a new password, gives it to the brokers and then writes it to the
// generated Secret. It reports false when the brokers did not take it (st says why).
//
// seed: brokers before the Secret. The Secret therefore never holds a password the brokers
// refuse: were the order reversed, an unreachable broker would leave the Secret holding a
// password nobody can log in with for as long as the outage lasts. The cost of this order is
// a password the brokers hold and no Secret does, when the Secret write fails; the next pass
// finds no usable Secret and rotates again.
func (r *Reconciler) rotate(ctx context.Context, u *naradv1.NaradUser, nc *naradv1.NaradCluster, b *brokerUser, src *source) (bool, error) {
	pw := newPassword()
	if !b.setPassword(ctx, pw, src.secretName) {
		return false, nil
	}
	data := secretData(u, nc, pw)
	sec := src.existing
	if sec != nil {
		sec.Data = data
		if err := r.Client.Update(ctx, sec); err != nil {
			return false, fmt.Errorf("update Secret %s: %w", src.secretName, err)
		}
	} else {
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: src.secretName, Labels: secretLabels()},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if err := controllerutil.SetControllerReference(u, sec, r.Scheme); err != nil {
			return false, fmt.Errorf("own Secret %s: %w", src.secretName, err)
		}
		if err := r.Client.Create(ctx, sec); err != nil {
			return false, fmt.Errorf("create Secret %s: %w", src.secretName, err)
		}
	}
	b.st.applied = versionOf(sec)
	r.event(u, "Normal", "PasswordGenerated", "Rotate", "generated a new password for broker user %q into Secret %q", b.name, src.secretName)
	return true, nil
}

// dropGenerated deletes the generated Secret once spec.passwordSecretRef takes over, so no
// stale credentials are left behind.
func (r *Reconciler) dropGenerated(ctx context.Context, u *naradv1.NaradUser) error {
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, secretKey(u, u.GeneratedSecretName()), &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read Secret %s: %w", u.GeneratedSecretName(), err)
	case !metav1.IsControlledBy(&sec, u):
		return nil
	}
	if err := r.Client.Delete(ctx, &sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s: %w", sec.Name, err)
	}
	r.event(u, "Normal", "GeneratedSecretDeleted", "Delete",
		"spec.passwordSecretRef is set: deleted the generated Secret %q", sec.Name)
	return nil
}

// newPassword returns a random password of 26 base32 characters (130 bits) from crypto/rand.
func newPassword() string { return rand.Text() }

// checkPassword says what is wrong with pw for the brokers, "" when nothing is.
func checkPassword(pw []byte) string {
	switch {
	case len(pw) == 0:
		return "the password is empty"
	case len(pw) > maxPasswordLen:
		return "the password is longer than " + strconv.Itoa(maxPasswordLen) + " bytes"
	}
	return ""
}

// secretData is the content of the generated Secret: the username, the password and the base
// URL of the cluster's client Service (no credentials in it).
func secretData(u *naradv1.NaradUser, nc *naradv1.NaradCluster, pw string) map[string][]byte {
	url := naming.Scheme(nc) + "://" + naming.ClientService(nc) + "." + nc.Namespace + ".svc:" + strconv.Itoa(naming.HTTPPort)
	return map[string][]byte{
		naradv1.UserSecretUsernameKey: []byte(u.BrokerUsername()),
		naradv1.UserSecretPasswordKey: []byte(pw),
		naradv1.UserSecretURLKey:      []byte(url),
	}
}

// secretLabels mark the generated Secret as the operator's (its owner reference names the
// NaradUser; a label could not hold every object name).
func secretLabels() map[string]string {
	return map[string]string{naming.LabelManagedBy: naming.ManagedBy, naming.LabelComponent: "user"}
}

// versionOf identifies one version of a Secret without anything derived from its content.
func versionOf(s *corev1.Secret) string { return string(s.UID) + "/" + s.ResourceVersion }
