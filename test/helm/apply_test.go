package helm

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"narad.dev/operator/testsupport"
)

// One envtest API server (kube-apiserver and etcd on 127.0.0.1) for the package, started by the
// first test that needs it with the chart's crds/ installed, stopped by TestMain.
var (
	envOnce sync.Once
	env     *envtest.Environment
	envCfg  *rest.Config
	envErr  error
)

// apiServer returns a client of the envtest API server, starting it on first use. The binaries
// come from KUBEBUILDER_ASSETS, else from hack/setup-envtest.sh (cached after its first build).
func apiServer(t testing.TB) *rest.Config {
	t.Helper()
	envOnce.Do(func() {
		assets, err := testsupport.EnvtestAssets()
		if err != nil {
			envErr = err
			return
		}
		env = &envtest.Environment{
			BinaryAssetsDirectory: assets,
			CRDDirectoryPaths:     []string{filepath.Join(chartDir(t), "crds")},
			ErrorIfCRDPathMissing: true,
		}
		envCfg, envErr = env.Start()
	})
	if envErr != nil {
		t.Fatalf("envtest: %v", envErr)
	}
	return envCfg
}

func stopEnvtest() {
	if env != nil && envCfg != nil {
		_ = env.Stop()
	}
}

func newClient(t testing.TB) client.Client {
	t.Helper()
	c, err := client.New(apiServer(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ensureNamespace creates a namespace for real (a dry run cannot create objects in a namespace
// that does not exist).
func ensureNamespace(t testing.TB, ctx context.Context, c client.Client, name string) {
	t.Helper()
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// installServiceMonitorStandIn installs schemaless CRDs for monitoring.coreos.com/v1
// ServiceMonitor and PrometheusRule (envtest has no prometheus-operator): they prove the
// rendered objects' group, version, kind and scope, not their fields. It returns once both
// CRDs are Established.
func installServiceMonitorStandIn(t testing.TB, ctx context.Context, c client.Client) {
	t.Helper()
	installMonitoringStandIn(t, ctx, c, "servicemonitors", "ServiceMonitor")
	installMonitoringStandIn(t, ctx, c, "prometheusrules", "PrometheusRule")
}

// installMonitoringStandIn installs a schemaless monitoring.coreos.com/v1 CRD of kind and
// returns once it is Established.
func installMonitoringStandIn(t testing.TB, ctx context.Context, c client.Client, plural, kind string) {
	t.Helper()
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind),
				Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
	if err != nil {
		t.Fatalf("%s stand-in CRD not established: %v", kind, err)
	}
}

// dryRunCreate creates every object with a server-side dry run, so the API server validates and
// admits it without storing it.
func dryRunCreate(t *testing.T, ctx context.Context, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("%s %s/%s refused: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func TestRenderedObjectsAreAcceptedByTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	setup := newClient(t)
	ensureNamespace(t, ctx, setup, releaseNamespace)
	ensureNamespace(t, ctx, setup, "queues") // fullValues' watchNamespace holds the manager's Role
	installServiceMonitorStandIn(t, ctx, setup)
	// A client made after the stand-in CRD is served discovers it.
	c := newClient(t)

	for name, vals := range map[string]string{"defaults": "", "every value set": fullValues} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, vals)
			if len(objs) < 7 {
				t.Fatalf("rendered only %d objects", len(objs))
			}
			dryRunCreate(t, ctx, c, objs)
		})
	}

	// The dry run validates: a rendered Deployment made invalid is refused.
	dep := only(t, render(t, ""), "Deployment").DeepCopy()
	if err := unstructured.SetNestedField(dep.Object, int64(-1), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, dep, client.DryRunAll); !apierrors.IsInvalid(err) {
		t.Errorf("a Deployment with replicas -1: err = %v, want Invalid", err)
	}
	// Nothing was stored.
	var stored unstructured.UnstructuredList
	stored.SetAPIVersion("apps/v1")
	stored.SetKind("DeploymentList")
	if err := c.List(ctx, &stored, client.InNamespace(releaseNamespace)); err != nil || len(stored.Items) != 0 {
		t.Errorf("dry runs stored %d Deployments (err %v)", len(stored.Items), err)
	}
}

func TestSamplesValidateAgainstTheCRDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t)
	const ns = "samples"
	ensureNamespace(t, ctx, c, ns)

	files, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	var topic *unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, o := range decodeFile(t, f) {
			o.SetNamespace(ns)
			kinds[o.GetKind()] = true
			if o.GetKind() == "Topic" {
				topic = o.DeepCopy()
			}
			if err := c.Create(ctx, o, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s refused: %v", filepath.Base(f), o.GetKind(), o.GetName(), err)
			}
		}
	}
	for _, k := range []string{"NaradCluster", "Topic", "FanoutLink"} {
		if !kinds[k] {
			t.Errorf("config/samples has no %s", k)
		}
	}
	if topic == nil {
		t.Fatal("no Topic sample")
	}
	// The CRDs' rules apply to the dry run: a Topic retention under an hour is refused (CEL).
	if err := unstructured.SetNestedField(topic.Object, int64(1000), "spec", "retentionMs"); err != nil {
		t.Fatal(err)
	}
	err = c.Create(ctx, topic, client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "retentionMs must be 0") {
		t.Errorf("Topic with retentionMs 1000: err = %v, want the CEL rule's refusal", err)
	}
}
