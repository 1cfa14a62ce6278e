package fanoutlink

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/controller/clusterref"
	"narad.dev/operator/naming"
)

// maxTargetURLs is the most target URLs the brokers accept for one remote link.
const maxTargetURLs = 8

// remotePrefix starts every remote link id on the brokers (remote:<topic>@<host:port>).
const remotePrefix = "remote:"

// target is a remote link's target as the brokers are asked to attach it.
type target struct {
	urls     string // comma-separated base URLs, tried in order by the brokers
	topic    string
	user     string // "" for a target without security
	password string
}

// id is the brokers' id of the link to t: remote:<topic>@<host:port of the first URL>. It is
// what the listing shows and what a detach names.
func (t target) id() (string, error) { return remoteID(t.urls, t.topic) }

func remoteID(urls, topic string) (string, error) {
	first, _, _ := strings.Cut(urls, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("bad target url %q", first)
	}
	return remotePrefix + topic + "@" + u.Host, nil
}

// refusal is why a remote target cannot be resolved yet (wait: the pass is Pending and
// retried with backoff) or at all as the spec stands (Failed, Degraded).
type refusal struct {
	wait    bool
	reason  string
	message string
}

func (f *refusal) record(st *status) {
	if f.wait {
		st.pending(f.reason, f.message)
	} else {
		st.failed(f.reason, f.message)
	}
}

// resolveTarget turns spec.remote into URLs and credentials. Only Kubernetes read failures
// other than NotFound are returned as errors.
func (r *Reconciler) resolveTarget(ctx context.Context, fl *naradv1.FanoutLink) (target, *refusal, error) {
	rm := fl.Spec.Remote
	t := target{urls: rm.URL, topic: rm.Topic}
	var nc *naradv1.NaradCluster
	if rm.ClusterRef != nil {
		var f *refusal
		var err error
		if nc, f, err = r.targetCluster(ctx, fl); f != nil || err != nil {
			return target{}, f, err
		}
		if t.urls = clusterURL(r.Brokers.Resolver, nc); t.urls == "" {
			return target{}, &refusal{wait: true, reason: "TargetClusterEmpty", message: fmt.Sprintf(
				"NaradCluster %s/%s has no replicas to send to", nc.Namespace, nc.Name)}, nil
		}
	}
	switch {
	case rm.CredentialsSecretRef != nil:
		user, pw, f, err := r.secretCredentials(ctx, fl.Namespace, rm.CredentialsSecretRef)
		if f != nil || err != nil {
			return target{}, f, err
		}
		t.user, t.password = user, pw
	case nc != nil && nc.Namespace != fl.Namespace:
		// The operator reads every namespace's Secrets; lending another namespace's admin
		// password to whoever may create a FanoutLink here would hand them that cluster.
		return target{}, &refusal{reason: "CredentialsRequired", message: fmt.Sprintf(
			"NaradCluster %s/%s is in another namespace: set remote.credentialsSecretRef to a Secret of namespace %q",
			nc.Namespace, nc.Name, fl.Namespace)}, nil
	case nc != nil:
		pw, f, err := r.adminPassword(ctx, nc)
		if f != nil || err != nil {
			return target{}, f, err
		}
		t.user, t.password = naming.AdminUser, pw
	}
	return t, nil, nil
}

// targetCluster reads the NaradCluster spec.remote.clusterRef names.
func (r *Reconciler) targetCluster(ctx context.Context, fl *naradv1.FanoutLink) (*naradv1.NaradCluster, *refusal, error) {
	key := targetKey(fl)
	var nc naradv1.NaradCluster
	err := r.Client.Get(ctx, key, &nc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &refusal{wait: true, reason: "TargetClusterNotFound", message: fmt.Sprintf("NaradCluster %s not found", key)}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("read target NaradCluster %s: %w", key, err)
	}
	return &nc, nil, nil
}

// targetKey is the namespaced name of spec.remote.clusterRef (the link's namespace when empty).
func targetKey(fl *naradv1.FanoutLink) types.NamespacedName {
	ref := fl.Spec.Remote.ClusterRef
	ns := ref.Namespace
	if ns == "" {
		ns = fl.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: ref.Name}
}

// secretCredentials reads the user and password of a credentials Secret in namespace ns.
func (r *Reconciler) secretCredentials(ctx context.Context, ns string, ref *naradv1.CredentialsSecretReference) (string, string, *refusal, error) {
	userKey, pwKey := ref.UserKey, ref.PasswordKey
	if userKey == "" {
		userKey = "username"
	}
	if pwKey == "" {
		pwKey = "password"
	}
	var sec corev1.Secret
	key := types.NamespacedName{Namespace: ns, Name: ref.Name}
	err := r.Client.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return "", "", &refusal{wait: true, reason: "CredentialsNotFound", message: fmt.Sprintf("Secret %s not found", key)}, nil
	case err != nil:
		return "", "", nil, fmt.Errorf("read credentials Secret %s: %w", key, err)
	}
	user, pw := string(sec.Data[userKey]), string(sec.Data[pwKey])
	if user == "" || pw == "" {
		return "", "", &refusal{reason: "CredentialsInvalid", message: fmt.Sprintf(
			"Secret %s must hold a non-empty %q and %q", key, userKey, pwKey)}, nil
	}
	return user, pw, nil, nil
}

// adminPassword reads the target cluster's admin password (the key the brokers read).
func (r *Reconciler) adminPassword(ctx context.Context, nc *naradv1.NaradCluster) (string, *refusal, error) {
	var sec corev1.Secret
	key := types.NamespacedName{Namespace: nc.Namespace, Name: naming.AdminSecret(nc)}
	err := r.Client.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return "", &refusal{wait: true, reason: "CredentialsNotFound", message: fmt.Sprintf("admin Secret %s of the target not found", key)}, nil
	case err != nil:
		return "", nil, fmt.Errorf("read admin Secret %s: %w", key, err)
	}
	pw := sec.Data[naradv1.AdminPasswordKey]
	if len(pw) == 0 {
		return "", &refusal{wait: true, reason: "CredentialsNotFound", message: fmt.Sprintf(
			"admin Secret %s of the target has no %q yet", key, naradv1.AdminPasswordKey)}, nil
	}
	return string(pw), nil, nil
}

// clusterURLResolver is a Resolver that also knows a whole cluster's client URL list.
type clusterURLResolver interface {
	ClusterURL(nc *naradv1.NaradCluster) string
}

// clusterURL is where the brokers of another cluster send a remote link's records: in a
// Kubernetes cluster, nc's client Service (every ready broker behind one name, scheme per
// TLS); with any other Resolver (tests, runners), the URLs of its ordinals 0… joined with
// commas, at most maxTargetURLs, so the brokers fail over between them.
func clusterURL(res brokers.Resolver, nc *naradv1.NaradCluster) string {
	switch v := res.(type) {
	case clusterURLResolver:
		return v.ClusterURL(nc)
	case brokers.DNSResolver, *brokers.DNSResolver:
		return naming.Scheme(nc) + "://" + naming.ClientService(nc) + "." + nc.Namespace + ".svc:" + strconv.Itoa(naming.HTTPPort)
	}
	ords := clusterref.Ordinals(nc)
	urls := make([]string, 0, min(len(ords), maxTargetURLs))
	for _, o := range ords[:min(len(ords), maxTargetURLs)] {
		urls = append(urls, res.PodURL(nc, o))
	}
	return strings.Join(urls, ",")
}
