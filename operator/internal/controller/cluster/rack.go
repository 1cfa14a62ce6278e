package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
	"narad.dev/operator/rack"
)

// Rack awareness (docs/kubernetes.md, "Racks and placement"): the broker pods' init container
// (the operator image's `manager rack`) reads the pod's Node and writes its zone to an emptyDir,
// and the broker reads it with --rack-file. Reading a Node takes a ClusterRole: the pods run as
// a ServiceAccount of their own, bound to the rack ClusterRole. That role (get nodes, nothing
// else) is installed with the operator by the Helm chart or config/rbac, so uninstalling the
// operator removes it; the operator only binds to it (docs/kubernetes.md, "RBAC").
const (
	// DefaultRackClusterRole is the rack ClusterRole's name in config/default and in the chart's
	// default release (Reconciler.RackClusterRole overrides it).
	DefaultRackClusterRole = "narad-operator-broker-rack"
	// labelBindingNamespace marks a cluster's ClusterRoleBinding with its namespace (the
	// binding is cluster-scoped, so no owner reference can delete it).
	labelBindingNamespace = "narad.dev/namespace"
	// rackFileEnv is the broker's --rack-file variable.
	rackFileEnv = "NARAD_RACK_FILE"
)

// rackEnabled reports whether nc's pods get the rack init container: the operator knows its
// image, and spec.broker.extraArgs does not set the rack itself.
func (r *Reconciler) rackEnabled(nc *naradv1.NaradCluster) bool {
	if r.RackImage == "" {
		return false
	}
	for _, a := range nc.Spec.Broker.ExtraArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "rack" || name == "rack-file") {
			return false
		}
	}
	return true
}

// brokerServiceAccount is the ServiceAccount of nc's pods.
func brokerServiceAccount(nc *naradv1.NaradCluster) string { return nc.Name + "-broker" }

// rackBindingName is the ClusterRoleBinding of nc's ServiceAccount: namespace and name, with a
// hash when they would not fit a name.
func rackBindingName(nc *naradv1.NaradCluster) string {
	name := "narad-rack." + nc.Namespace + "." + nc.Name
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(nc.Namespace + "/" + nc.Name))
	return name[:240] + "." + hex.EncodeToString(sum[:6])
}

// addRack adds the init container, its volume, the broker's --rack-file and the pods'
// ServiceAccount to spec.
func addRack(spec *corev1.PodSpec, nc *naradv1.NaradCluster, image string) {
	mount := corev1.VolumeMount{Name: rack.VolumeName, MountPath: rack.MountPath}
	spec.ServiceAccountName = brokerServiceAccount(nc)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: rack.VolumeName, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: new(resource.MustParse("1Mi"))}}})
	spec.InitContainers = append(spec.InitContainers, corev1.Container{
		Name:    rack.ContainerName,
		Image:   image,
		Command: []string{"/manager", rack.Subcommand, "--file=" + rack.Path()},
		Env: []corev1.EnvVar{{Name: rack.NodeNameEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
		VolumeMounts: []corev1.VolumeMount{mount},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: restrictedContainer(),
	})
	broker := &spec.Containers[0]
	broker.Env = append(broker.Env, corev1.EnvVar{Name: rackFileEnv, Value: rack.Path()})
	mount.ReadOnly = true
	broker.VolumeMounts = append(broker.VolumeMounts, mount)
}

// reconcileRackAccess gives nc's pods their ServiceAccount and the right to read Nodes (nc's
// binding to the rack ClusterRole), or removes the binding when the pods get no rack.
func (r *Reconciler) reconcileRackAccess(ctx context.Context, nc *naradv1.NaradCluster) error {
	if !r.rackEnabled(nc) {
		return r.deleteRackBinding(ctx, nc)
	}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: objectMeta(nc, brokerServiceAccount(nc)),
	}
	if err := r.apply(ctx, nc, sa); err != nil {
		return err
	}
	labels := naming.Labels(nc)
	labels[labelBindingNamespace] = nc.Namespace
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: rackBindingName(nc), Labels: labels},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: nc.Namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.rackClusterRole()},
	}
	err := r.applyUnowned(ctx, binding)
	if !apierrors.IsInvalid(err) {
		return err
	}
	// A binding's roleRef is immutable: one made for another rack ClusterRole (an operator
	// installed under another name, or before the chart shipped the role) is replaced.
	if err := r.deleteRackBinding(ctx, nc); err != nil {
		return err
	}
	return r.applyUnowned(ctx, binding)
}

// rackClusterRole is the ClusterRole the pods' ServiceAccounts are bound to.
func (r *Reconciler) rackClusterRole() string {
	if r.RackClusterRole != "" {
		return r.RackClusterRole
	}
	return DefaultRackClusterRole
}

// applyUnowned server-side applies a cluster-scoped object, which a namespaced NaradCluster
// cannot own.
func (r *Reconciler) applyUnowned(ctx context.Context, obj ctrlclient.Object) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: pruneApplied(content)}
	if err := r.Client.Apply(ctx, ctrlclient.ApplyConfigurationFromUnstructured(u), fieldOwner, ctrlclient.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// deleteRackBinding removes nc's ClusterRoleBinding (its deletion, or rack turned off).
func (r *Reconciler) deleteRackBinding(ctx context.Context, nc *naradv1.NaradCluster) error {
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rackBindingName(nc)}}
	if err := r.Client.Delete(ctx, b); ctrlclient.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete ClusterRoleBinding %s: %w", b.Name, err)
	}
	return nil
}
