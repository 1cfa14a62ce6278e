// Package helm tests the charts/narad-operator Helm chart through the Helm Go SDK: it renders the
// chart as `helm install --dry-run` would, lints it, checks what the values produce (the manager's
// flags, the RBAC rules, the optional ServiceMonitor) and creates every rendered object with a
// server-side dry run on an envtest API server that has the chart's CRDs.
package helm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"narad.dev/operator/testsupport"
)

// The release every test renders. The Kubernetes version is the one envtest runs
// (hack/setup-envtest.sh), so the chart's kubeVersion constraint is checked against it.
const (
	releaseName      = "narad-operator"
	releaseNamespace = "narad-system"
	kubeVersion      = "v1.37.2"
)

// TestMain stops what the tests started lazily (the envtest API server, the manager binary).
func TestMain(m *testing.M) {
	code := m.Run()
	stopEnvtest()
	if managerDir != "" {
		_ = os.RemoveAll(managerDir)
	}
	os.Exit(code)
}

// repoRoot is the directory holding go.work.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := testsupport.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "narad-operator") }

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// values parses a values document (YAML) as `helm install -f` would.
func values(t testing.TB, doc string) map[string]interface{} {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(doc))
	if err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v
}

// release names a Helm release: its name and namespace.
type release struct{ name, namespace string }

var defaultRelease = release{releaseName, releaseNamespace}

// renderErr renders the chart for the default release.
func renderErr(t testing.TB, vals string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderReleaseErr(t, defaultRelease, vals)
}

// renderReleaseErr renders the chart with the given values, client-only, as
// `helm install --dry-run` does, and returns the manifest's objects in install order.
func renderReleaseErr(t testing.TB, r release, vals string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun = true
	install.ClientOnly = true
	install.ReleaseName = r.name
	install.Namespace = r.namespace
	install.KubeVersion = kv
	rel, err := install.Run(loadChart(t), values(t, vals))
	if err != nil {
		return nil, err
	}
	manifests := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(manifests))
	for k := range manifests {
		keys = append(keys, k)
	}
	// SplitManifests keys are "manifest-<n>"; sort by n to keep the install order.
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j])
		}
		return keys[i] < keys[j]
	})
	var objs []*unstructured.Unstructured
	for _, k := range keys {
		o, err := decode(manifests[k])
		if err != nil {
			t.Fatalf("rendered document %s: %v\n%s", k, err, manifests[k])
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

func render(t testing.TB, vals string) []*unstructured.Unstructured {
	t.Helper()
	return renderRelease(t, defaultRelease, vals)
}

func renderRelease(t testing.TB, r release, vals string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderReleaseErr(t, r, vals)
	if err != nil {
		t.Fatalf("render %+v with values %q: %v", r, vals, err)
	}
	return objs
}

// decode parses one YAML document into an object; an empty document gives nil.
func decode(doc string) (*unstructured.Unstructured, error) {
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	o := &unstructured.Unstructured{Object: m}
	if o.GetKind() == "" || o.GetAPIVersion() == "" {
		return nil, errors.New("document without apiVersion or kind")
	}
	return o, nil
}

// decodeFile reads the objects of a multi-document YAML file.
func decodeFile(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---") {
		o, err := decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// ofKind returns the objects of one kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// only returns the single object of a kind, failing when there is not exactly one.
func only(t testing.TB, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := ofKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("rendered %d %s objects, want 1", len(found), kind)
	}
	return found[0]
}

// typed converts an unstructured object into a typed one.
func typed[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

// The manager binary, built once from operator/cmd/manager, so rendered args are checked by the
// manager's own flag parser.
var (
	managerOnce sync.Once
	managerDir  string
	managerBin  string
	managerErr  error
)

func managerBinary(t testing.TB) string {
	t.Helper()
	managerOnce.Do(func() {
		managerDir, managerErr = os.MkdirTemp("", "narad-helm-manager-")
		if managerErr != nil {
			return
		}
		bin := filepath.Join(managerDir, "manager")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
		cmd.Dir = filepath.Join(repoRoot(t), "operator")
		if out, err := cmd.CombinedOutput(); err != nil {
			managerErr = errors.New("go build ./cmd/manager: " + err.Error() + "\n" + string(out))
			return
		}
		managerBin = bin
	})
	if managerErr != nil {
		t.Fatal(managerErr)
	}
	return managerBin
}
