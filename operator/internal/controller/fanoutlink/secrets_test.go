package fanoutlink

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// remoteLink is a FanoutLink of parent on cluster "src" in ns with spec.remote remote.
func remoteLink(ns, name string, remote *naradv1.FanoutRemote) *naradv1.FanoutLink {
	return &naradv1.FanoutLink{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: naradv1.FanoutLinkSpec{ClusterRef: naradv1.ClusterReference{Name: "src"}, Parent: "orders", Remote: remote}}
}

func TestASecretMapsToTheRemoteLinksThatReadTheirCredentialsFromIt(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(naradv1.AddToScheme(s))
	dr := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "dr"}}
	custom := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "dr2"}}
	custom.Spec.Security.AdminSecretRef = &naradv1.SecretReference{Name: "custom-admin"}
	creds := &naradv1.CredentialsSecretReference{Name: "creds"}
	objs := []ctrlclient.Object{dr, custom,
		// the target's admin Secret, no credentials of its own
		remoteLink("a", "by-admin", &naradv1.FanoutRemote{ClusterRef: &naradv1.RemoteClusterReference{Name: "dr"}, Topic: "t"}),
		// the same target with a credentials Secret: the admin Secret is not its business
		remoteLink("a", "dr-with-creds", &naradv1.FanoutRemote{ClusterRef: &naradv1.RemoteClusterReference{Name: "dr"},
			Topic: "t", CredentialsSecretRef: creds}),
		remoteLink("a", "url-with-creds", &naradv1.FanoutRemote{URL: "http://x:7942", Topic: "t", CredentialsSecretRef: creds}),
		// another namespace: its credentials Secret is its own namespace's "creds"
		remoteLink("b", "cross-ns", &naradv1.FanoutRemote{ClusterRef: &naradv1.RemoteClusterReference{Namespace: "a", Name: "dr"},
			Topic: "t", CredentialsSecretRef: creds}),
		remoteLink("a", "by-custom-admin", &naradv1.FanoutRemote{ClusterRef: &naradv1.RemoteClusterReference{Name: "dr2"}, Topic: "t"}),
		remoteLink("a", "url-no-creds", &naradv1.FanoutRemote{URL: "http://x:7942", Topic: "t"}),
		remoteLink("a", "local", nil),
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	for _, ix := range indexes {
		b = b.WithIndex(&naradv1.FanoutLink{}, ix.field, ix.fn)
	}
	r := &Reconciler{Client: b.Build()}
	for _, tc := range []struct {
		ns, secret string
		want       []string
	}{
		{"a", naming.AdminSecret(dr), []string{"a/by-admin"}},
		{"a", "creds", []string{"a/dr-with-creds", "a/url-with-creds"}},
		{"b", "creds", []string{"b/cross-ns"}},
		{"a", "custom-admin", []string{"a/by-custom-admin"}},
		{"b", naming.AdminSecret(dr), nil}, // same name, another namespace
		{"a", "unrelated", nil},
	} {
		var got []string
		for _, req := range r.linksOfSecret(context.Background(),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.secret}}) {
			got = append(got, req.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Secret %s/%s maps to %v, want %v", tc.ns, tc.secret, got, tc.want)
		}
	}
}

func TestOnlyASecretDataChangeRetriesItsLinks(t *testing.T) {
	p := secretDataChanged()
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "creds"},
		Data: map[string][]byte{"username": []byte("u"), "password": []byte("p")}}
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"team": "x"}
	changed := old.DeepCopy()
	changed.Data["password"] = []byte("q")
	switch {
	case !p.Create(event.CreateEvent{Object: old}):
		t.Error("a created Secret must retry its links")
	case !p.Delete(event.DeleteEvent{Object: old}):
		t.Error("a deleted Secret must retry its links")
	case p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: relabelled}):
		t.Error("a label change cannot change credentials")
	case !p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: changed}):
		t.Error("a changed password must retry its links")
	}
}
