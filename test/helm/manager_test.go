package helm

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// httpOK reports whether GET url answers 200, and the body.
func httpOK(ctx context.Context, url string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, string(body)
}

// TestManagerRunsWithTheChartsArgsAndRBAC installs the chart's ServiceAccount and RBAC for real,
// then runs the manager binary with the Deployment's rendered args as that ServiceAccount (a
// client certificate for system:serviceaccount:<ns>:<name>): it must elect itself leader, start
// every controller (their caches sync only if the RBAC allows list and watch), create a
// NaradCluster's StatefulSet and bind its brokers to the chart's rack ClusterRole, answer
// /readyz and /metrics, and exit 0 on SIGTERM. It does so with the cluster-wide ClusterRole and
// with watchNamespace's Role; then it uninstalls (the NaradCluster, then the release's objects)
// and finds no cluster-scoped object of Narad's left.
func TestManagerRunsWithTheChartsArgsAndRBAC(t *testing.T) {
	t.Run("cluster-wide", func(t *testing.T) {
		smokeManager(t, release{name: "smoke", namespace: "narad-smoke"}, "")
	})
	t.Run("one namespace", func(t *testing.T) {
		smokeManager(t, release{name: "smoke-ns", namespace: "narad-smoke-ns"}, "narad-watched")
	})
}

// smokeManager is one run of TestManagerRunsWithTheChartsArgsAndRBAC: release rel, watching
// watchNamespace (every namespace when empty; the NaradCluster then lives in rel's).
func smokeManager(t *testing.T, rel release, watchNamespace string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := managerBinary(t)
	admin := newClient(t)
	ensureNamespace(t, ctx, admin, rel.namespace)
	vals := "logLevel: debug"
	clusterNamespace := rel.namespace
	if watchNamespace != "" {
		vals += "\nwatchNamespace: " + watchNamespace
		clusterNamespace = watchNamespace
		ensureNamespace(t, ctx, admin, watchNamespace)
	}

	objs := renderRelease(t, rel, vals)
	var installed []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := admin.Create(ctx, o.DeepCopy()); err != nil {
				t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			installed = append(installed, o)
		}
	}
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	sa := dep.Spec.Template.Spec.ServiceAccountName
	user, err := env.AddUser(envtest.User{
		Name:   fmt.Sprintf("system:serviceaccount:%s:%s", rel.namespace, sa),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + rel.namespace, "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	readLog := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}

	// The rendered args, then overrides that keep the servers on loopback ports of our own and
	// name the Lease namespace (in a pod it is the pod's namespace); later flags win.
	probe, metrics := freeAddr(t), freeAddr(t)
	args := append(dep.Spec.Template.Spec.Containers[0].Args,
		"--health-probe-bind-address="+probe, "--metrics-bind-address="+metrics,
		"--leader-election-namespace="+rel.namespace)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			lines := strings.Split(readLog(), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("manager log (tail):\n%s", strings.Join(lines, "\n"))
		}
	}()

	// waitFor polls cond until it holds; the manager exiting or being refused by RBAC fails at once.
	waitFor := func(what string, cond func(ctx context.Context) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true,
			func(ctx context.Context) (bool, error) {
				select {
				case err := <-exited:
					exited <- err
					return false, fmt.Errorf("manager exited: %v", err)
				default:
				}
				if out := readLog(); strings.Contains(out, "forbidden") {
					return false, fmt.Errorf("the manager was refused something its RBAC should allow:\n%s",
						grepLines(out, "forbidden"))
				}
				return cond(ctx), nil
			})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	waitFor("/readyz", func(ctx context.Context) bool { ok, _ := httpOK(ctx, "http://"+probe+"/readyz"); return ok })
	waitFor("leader election", func(ctx context.Context) bool {
		var lease coordinationv1.Lease
		err := admin.Get(ctx, client.ObjectKey{Namespace: rel.namespace, Name: "narad-operator.narad.dev"}, &lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	waitFor("three controllers started", func(context.Context) bool {
		return strings.Count(readLog(), `"Starting workers"`) >= 3
	})

	// The chart's RBAC lets the manager create what a NaradCluster owns, and bind the brokers'
	// ServiceAccount to the chart's rack ClusterRole.
	nc := decodeFile(t, filepath.Join(repoRoot(t), "config", "samples", "narad_v1alpha1_naradcluster.yaml"))[0]
	nc.SetNamespace(clusterNamespace)
	if err := admin.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	waitFor("the NaradCluster's StatefulSet", func(ctx context.Context) bool {
		var sts appsv1.StatefulSet
		return admin.Get(ctx, client.ObjectKey{Namespace: clusterNamespace, Name: nc.GetName()}, &sts) == nil
	})
	rackRole := withSuffix(t, objs, "ClusterRole", "-broker-rack").GetName()
	waitFor("the brokers' binding to the rack ClusterRole", func(ctx context.Context) bool {
		var b rbacv1.ClusterRoleBinding
		err := admin.Get(ctx, client.ObjectKey{Name: "narad-rack." + clusterNamespace + "." + nc.GetName()}, &b)
		return err == nil && b.RoleRef.Name == rackRole
	})
	waitFor("/metrics", func(ctx context.Context) bool {
		ok, body := httpOK(ctx, "http://"+metrics+"/metrics")
		return ok && strings.Contains(body, "controller_runtime_reconcile_total")
	})

	// Uninstall as the chart's README says: the Narad objects first, while the operator runs.
	if err := admin.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	waitFor("the NaradCluster's deletion", func(ctx context.Context) bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(nc), nc.DeepCopy()))
	})
	if out := readLog(); strings.Contains(out, "forbidden") {
		t.Errorf("the manager was refused something its RBAC should allow:\n%s", grepLines(out, "forbidden"))
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("manager exit after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("manager did not stop after SIGTERM")
	}

	// helm uninstall deletes the release's objects; nothing cluster-scoped of Narad's remains.
	for _, o := range installed {
		if err := admin.Delete(ctx, o.DeepCopy()); err != nil {
			t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	fullname := dep.Name
	leftover := func(name string) bool {
		return strings.HasPrefix(name, fullname+"-") || strings.HasPrefix(name, "narad-rack."+clusterNamespace+".") ||
			name == "narad-broker-rack"
	}
	var roles rbacv1.ClusterRoleList
	var bindings rbacv1.ClusterRoleBindingList
	if err := admin.List(ctx, &roles); err != nil {
		t.Fatal(err)
	}
	if err := admin.List(ctx, &bindings); err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Items {
		if leftover(r.Name) {
			t.Errorf("ClusterRole %s outlives the uninstall", r.Name)
		}
	}
	for _, b := range bindings.Items {
		if leftover(b.Name) {
			t.Errorf("ClusterRoleBinding %s outlives the uninstall", b.Name)
		}
	}
}

// grepLines returns the lines of s containing substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
