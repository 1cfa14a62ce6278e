package helm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restrictedNamespace creates a namespace whose pods the API server's PodSecurity admission
// holds to the restricted standard.
func restrictedNamespace(t testing.TB, ctx context.Context, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// podOf is the pod a Deployment's ReplicaSet would create, in namespace ns.
func podOf(dep *appsv1.Deployment, ns string) *corev1.Pod {
	tpl := dep.Spec.Template.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: dep.Name + "-", Namespace: ns, Labels: tpl.Labels},
		Spec:       tpl.Spec,
	}
}

// The operator's own pod passes the restricted Pod Security Standard, as the chart renders it
// and as config/manager declares it; config/manager's namespace enforces the standard; and a
// pod with one field broken is refused, so the admission the test relies on is live.
func TestOperatorPodPassesTheRestrictedStandard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t)
	const ns = "psa-restricted"
	restrictedNamespace(t, ctx, c, ns)

	manifests := decodeFile(t, filepath.Join(repoRoot(t), "config", "manager", "manager.yaml"))
	if got := only(t, manifests, "Namespace").GetLabels()["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("config/manager's Namespace enforces %q, want restricted", got)
	}
	deployments := map[string]*appsv1.Deployment{
		"chart defaults":        typed[appsv1.Deployment](t, only(t, render(t, ""), "Deployment")),
		"chart, every value":    typed[appsv1.Deployment](t, only(t, render(t, fullValues), "Deployment")),
		"config/manager":        typed[appsv1.Deployment](t, only(t, manifests, "Deployment")),
		"chart, metrics off":    typed[appsv1.Deployment](t, only(t, render(t, "metrics: {enabled: false}"), "Deployment")),
		"chart, no rbac object": typed[appsv1.Deployment](t, only(t, render(t, "rbac: {create: false}"), "Deployment")),
	}
	for name, dep := range deployments {
		t.Run(name, func(t *testing.T) {
			pod := podOf(dep, ns)
			// fullValues names a PriorityClass envtest does not have; it is not what is checked.
			pod.Spec.PriorityClassName = ""
			for _, ctr := range pod.Spec.Containers {
				if ctr.SecurityContext == nil || ctr.SecurityContext.ReadOnlyRootFilesystem == nil ||
					!*ctr.SecurityContext.ReadOnlyRootFilesystem {
					t.Errorf("container %s: root filesystem not read-only", ctr.Name)
				}
			}
			if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
				t.Errorf("pod security context %+v: want a numeric non-root runAsUser", sc)
			}
			if err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
				t.Errorf("refused in a restricted namespace: %v", err)
			}
			broken := pod.DeepCopy()
			broken.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true)
			err := c.Create(ctx, broken, client.DryRunAll)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
				t.Errorf("a pod allowing privilege escalation: err = %v, want Forbidden by PodSecurity", err)
			}
		})
	}
}
