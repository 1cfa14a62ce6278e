package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// Kinds of other operators the cluster controller creates when their CRDs are installed. They
// are handled as unstructured objects, so the operator does not depend on those projects.
var (
	serviceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	certificateGVK    = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
)

// errKindNotServed means the API server does not serve a kind (its CRD is not installed).
var errKindNotServed = errors.New("kind not served")

// kindServed asks the RESTMapper whether the API server serves gvk. A group it has not seen
// makes it rediscover the server's groups, so a CRD installed later is found.
func (r *Reconciler) kindServed(gvk schema.GroupVersionKind) (bool, error) {
	_, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	default:
		return false, fmt.Errorf("discover %s: %w", gvk, err)
	}
}

// applyAddon applies u when its kind is served, or returns errKindNotServed.
func (r *Reconciler) applyAddon(ctx context.Context, nc *naradv1.NaradCluster, u *unstructured.Unstructured) error {
	served, err := r.kindServed(u.GroupVersionKind())
	if err != nil {
		return err
	}
	if !served {
		return errKindNotServed
	}
	if err := controllerutil.SetControllerReference(nc, u, r.Scheme); err != nil {
		return err
	}
	before := &unstructured.Unstructured{}
	before.SetGroupVersionKind(u.GroupVersionKind())
	existed, err := r.exists(ctx, ctrlclient.ObjectKeyFromObject(u), before)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return errKindNotServed // the CRD went away after discovery
		}
		return err
	}
	err = r.applyUnstructured(ctx, nc, u, existed, before)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return errKindNotServed
	}
	return err
}

// removeAddon deletes the object of nc of kind gvk and name, if its kind is served. It only
// looks when the spec changed since the last reconcile (the moment an add-on can be turned
// off), so a cluster without the CRD does not rediscover the API on every reconcile.
func (r *Reconciler) removeAddon(ctx context.Context, nc *naradv1.NaradCluster, gvk schema.GroupVersionKind, name string) error {
	if nc.Generation == nc.Status.ObservedGeneration {
		return nil
	}
	served, err := r.kindServed(gvk)
	if err != nil || !served {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	found, err := r.exists(ctx, ctrlclient.ObjectKey{Namespace: nc.Namespace, Name: name}, u)
	if err != nil || !found || !isControlledBy(u, nc) {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	if err := r.Client.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", gvk.Kind, name, err)
	}
	r.event(nc, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s %s", gvk.Kind, name)
	return nil
}

func isControlledBy(u *unstructured.Unstructured, nc *naradv1.NaradCluster) bool {
	for _, ref := range u.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.UID == nc.UID {
			return true
		}
	}
	return false
}

// labelsValue converts labels for an unstructured object.
func labelsValue(l map[string]string) map[string]any {
	out := make(map[string]any, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}

// desiredServiceMonitor scrapes every broker's /metrics through the headless Service (which
// lists not-ready pods too), with spec.monitoring's labels, interval and scrape timeout.
func desiredServiceMonitor(nc *naradv1.NaradCluster) *unstructured.Unstructured {
	sel := naming.Selector(nc)
	sel[labelServiceRole] = serviceRoleHeadless
	endpoint := map[string]any{"port": naming.HTTPPortName, "path": "/metrics", "scheme": naming.Scheme(nc)}
	if name := naming.TLSSecret(nc); name != "" {
		endpoint["tlsConfig"] = map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": name, "key": tlsCAKey}},
			"serverName": naming.HeadlessService(nc) + "." + nc.Namespace + ".svc",
		}
	}
	mon := nc.Spec.Monitoring
	if mon.Interval != "" {
		endpoint["interval"] = mon.Interval
	}
	if mon.ScrapeTimeout != "" {
		endpoint["scrapeTimeout"] = mon.ScrapeTimeout
	}
	labels := map[string]string{}
	maps.Copy(labels, mon.Labels)
	maps.Copy(labels, naming.Labels(nc)) // the cluster's own labels win
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": naming.ServiceMonitor(nc), "namespace": nc.Namespace, "labels": labelsValue(labels),
		},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": labelsValue(sel)},
			"namespaceSelector": map[string]any{"matchNames": []any{nc.Namespace}},
			"endpoints":         []any{endpoint},
		},
	}}
	u.SetGroupVersionKind(serviceMonitorGVK)
	return u
}

// certificateDNSNames are the names the brokers' certificate is valid for: any pod of the
// headless Service (a wildcard, so scaling never reissues it and never rolls the pods) and both
// Services.
func certificateDNSNames(nc *naradv1.NaradCluster) []any {
	var names []any
	for _, suffix := range []string{".svc", ".svc.cluster.local"} {
		names = append(names, "*."+naming.HeadlessService(nc)+"."+nc.Namespace+suffix)
	}
	for _, svc := range []string{naming.HeadlessService(nc), naming.ClientService(nc)} {
		names = append(names, svc, svc+"."+nc.Namespace, svc+"."+nc.Namespace+".svc",
			svc+"."+nc.Namespace+".svc.cluster.local")
	}
	return names
}

// desiredCertificate asks cert-manager for the brokers' certificate (server and client use:
// the nodes authenticate each other with it).
func desiredCertificate(nc *naradv1.NaradCluster) *unstructured.Unstructured {
	ref := nc.Spec.TLS.CertManager.IssuerRef
	issuer := map[string]any{"name": ref.Name}
	if ref.Kind != "" {
		issuer["kind"] = ref.Kind
	}
	if ref.Group != "" {
		issuer["group"] = ref.Group
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": naming.Certificate(nc), "namespace": nc.Namespace, "labels": labelsValue(naming.Labels(nc)),
		},
		"spec": map[string]any{
			"secretName": naming.TLSSecret(nc),
			"commonName": naming.HeadlessService(nc) + "." + nc.Namespace + ".svc",
			"dnsNames":   certificateDNSNames(nc),
			"issuerRef":  issuer,
			"usages":     []any{"digital signature", "key encipherment", "server auth", "client auth"},
		},
	}}
	u.SetGroupVersionKind(certificateGVK)
	return u
}

// reconcileServiceMonitor creates or removes the ServiceMonitor. It returns a note for the
// Ready condition when one is wanted but its CRD is not installed.
func (r *Reconciler) reconcileServiceMonitor(ctx context.Context, nc *naradv1.NaradCluster) (string, error) {
	if !nc.Spec.Monitoring.ServiceMonitor {
		return "", r.removeAddon(ctx, nc, serviceMonitorGVK, naming.ServiceMonitor(nc))
	}
	if msg := invalidLabels(nc.Spec.Monitoring.Labels); msg != "" {
		return "ServiceMonitor not created: spec.monitoring.labels: " + msg, nil
	}
	err := r.applyAddon(ctx, nc, desiredServiceMonitor(nc))
	if errors.Is(err, errKindNotServed) {
		return "ServiceMonitor not created: the monitoring.coreos.com/v1 ServiceMonitor CRD is not installed", nil
	}
	return "", err
}

// invalidLabels says why labels cannot be an object's labels ("" when they can), checked
// before the API server would refuse the whole ServiceMonitor, in a stable (sorted) order.
func invalidLabels(labels map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Sprintf("key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Sprintf("value of %q: %s", k, strings.Join(errs, "; "))
		}
	}
	return ""
}

// reconcileCertificate creates or removes the cert-manager Certificate; a wanted one whose CRD
// is missing blocks the StatefulSet (its pods could never get their certificate).
func (r *Reconciler) reconcileCertificate(ctx context.Context, nc *naradv1.NaradCluster) (*blocker, error) {
	if nc.Spec.TLS == nil || nc.Spec.TLS.CertManager == nil {
		return nil, r.removeAddon(ctx, nc, certificateGVK, naming.Certificate(nc))
	}
	err := r.applyAddon(ctx, nc, desiredCertificate(nc))
	if errors.Is(err, errKindNotServed) {
		return &blocker{ReasonCertManagerMissing,
			"spec.tls.certManager is set but the cert-manager.io/v1 Certificate CRD is not installed"}, nil
	}
	return nil, err
}
