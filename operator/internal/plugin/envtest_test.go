package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
	"narad.dev/operator/testsupport"
)

// The package's tests share one envtest API server (kube-apiserver + etcd with the narad CRDs);
// each test works in a namespace of its own.
var (
	k8s        client.Client
	kubeconfig string
	// testNow is the plugin's clock in tests, so ETAs and restart stamps are predictable.
	testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func TestMain(m *testing.M) {
	os.Exit(runWithEnvtest(m))
}

func runWithEnvtest(m *testing.M) int {
	root, err := testsupport.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	assets, err := testsupport.EnvtestAssets()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// envtest picks its ports by binding and releasing them; with other test binaries starting
	// API servers on the same machine a port can be taken in between, so try a few times, each
	// with a fresh environment.
	var (
		env *envtest.Environment
		cfg *rest.Config
	)
	for attempt := 1; ; attempt++ {
		env = &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
			BinaryAssetsDirectory: assets,
		}
		if cfg, err = env.Start(); err == nil {
			break
		}
		fmt.Fprintf(os.Stderr, "start envtest (attempt %d): %v\n", attempt, err)
		_ = env.Stop()
		if attempt == 3 {
			return 1
		}
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()
	dir, err := os.MkdirTemp("", "kubectl-narad-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := naradv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// result is one in-process run of the plugin.
type result struct {
	out, err string
	code     int
}

// run executes `kubectl narad --kubeconfig <envtest> args...` in-process with stdin.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	o := Options{
		Streams:      genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut},
		Now:          func() time.Time { return testNow },
		PollInterval: 20 * time.Millisecond,
	}
	code := Run(t.Context(), o, append([]string{"--kubeconfig", kubeconfig}, args...))
	return result{out: out.String(), err: errOut.String(), code: code}
}

// newNamespace creates a namespace for one test (envtest has no namespace controller, so it is
// left behind with the API server).
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := k8s.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// createCluster creates a NaradCluster of replicas and writes status into its status.
func createCluster(t *testing.T, ns, name string, replicas int32, status naradv1.NaradClusterStatus) *naradv1.NaradCluster {
	t.Helper()
	nc := &naradv1.NaradCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       naradv1.NaradClusterSpec{Replicas: replicas, InitialClusterSize: 3},
	}
	if err := k8s.Create(t.Context(), nc); err != nil {
		t.Fatalf("create NaradCluster: %v", err)
	}
	nc.Status = status
	if err := k8s.Status().Update(t.Context(), nc); err != nil {
		t.Fatalf("write NaradCluster status: %v", err)
	}
	return nc
}

func getCluster(t *testing.T, ns, name string) *naradv1.NaradCluster {
	t.Helper()
	nc := &naradv1.NaradCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, nc); err != nil {
		t.Fatalf("get NaradCluster: %v", err)
	}
	return nc
}

// previewAnswer computes the fake operator's answer to a preview of replicas.
type previewAnswer func(nc *naradv1.NaradCluster, replicas int32) naradv1.ScalePreview

// playOperator answers the scale-preview annotation of ns/name the way the operator does: when
// the annotation holds a request status.scalePreview has not answered yet, it writes answer's
// preview with that request. It runs until the test ends; it returns a count of answers given.
func playOperator(t *testing.T, ns, name string, answer previewAnswer) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				nc := &naradv1.NaradCluster{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nc); err != nil {
					return err
				}
				req := nc.Annotations[naming.ScalePreviewAnnotation]
				if req == "" || (nc.Status.ScalePreview != nil && nc.Status.ScalePreview.Request == req) {
					return nil
				}
				var replicas int32
				if _, err := fmt.Sscanf(req, "%d/", &replicas); err != nil {
					return fmt.Errorf("bad preview request %q: %w", req, err)
				}
				p := answer(nc, replicas)
				p.Request, p.Replicas, p.ObservedAt = req, replicas, metav1.NewTime(testNow)
				nc.Status.ScalePreview = &p
				if err := k8s.Status().Update(ctx, nc); err != nil {
					return err
				}
				mu.Lock()
				answers++
				mu.Unlock()
				return nil
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("fake operator: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return answers
	}
}
