// Package testenv bootstraps the controller suites: a real kube-apiserver and etcd (envtest)
// with the narad.dev CRDs, and a real single-node narad broker on a loopback address the
// operator reaches through a brokers.ResolverFunc. It is imported by tests only.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/naming"
)

// RepoRoot walks up from the working directory to the directory holding go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.work not found above the working directory")
		}
		dir = parent
	}
}

// Scheme returns a scheme with the built-in kinds and narad.dev/v1alpha1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(naradv1.AddToScheme(s))
	return s
}

// APIServer is a running envtest control plane with the narad.dev CRDs installed.
type APIServer struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client ctrlclient.Client // uncached, for the specs' own reads and writes
}

// StartAPIServer starts kube-apiserver and etcd from $KUBEBUILDER_ASSETS, or from the cache
// hack/setup-envtest.sh fills (and prints) when the variable is unset.
func StartAPIServer() (*APIServer, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		out, err := exec.Command("bash", filepath.Join(root, "hack", "setup-envtest.sh")).Output()
		if err != nil {
			return nil, fmt.Errorf("hack/setup-envtest.sh: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		assets = strings.TrimSpace(lines[len(lines)-1])
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: Scheme()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &APIServer{Env: env, Config: cfg, Client: c}, nil
}

// Stop stops the control plane.
func (a *APIServer) Stop() error { return a.Env.Stop() }

// NewManager returns a manager for one suite's controllers: no metrics or health listeners, no
// leader election, controller names not checked for uniqueness (a suite may build several).
func (a *APIServer) NewManager() (ctrl.Manager, error) {
	skip := true
	return ctrl.NewManager(a.Config, ctrl.Options{
		Scheme:                 Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
}

// Unreachable is where the resolver of CreateCluster sends every other cluster: a closed port,
// so a spec can show what a cluster without an answering broker looks like.
const Unreachable = "http://127.0.0.1:1"

// Cluster is a NaradCluster object standing for a running broker, with its admin Secret.
type Cluster struct {
	Object   *naradv1.NaradCluster
	Resolver brokers.Resolver // every ordinal → the broker's URL
}

// CreateCluster creates namespace ns (if needed), a one-replica NaradCluster named name and
// its admin Secret holding password. Its Resolver maps every ordinal of that cluster to the
// broker at url, and any other cluster to Unreachable.
func CreateCluster(ctx context.Context, c ctrlclient.Client, ns, name, password, url string) (*Cluster, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); ctrlclient.IgnoreAlreadyExists(err) != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	nc := &naradv1.NaradCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       naradv1.NaradClusterSpec{Replicas: 1, InitialClusterSize: 1},
	}
	if err := c.Create(ctx, nc); err != nil {
		return nil, fmt.Errorf("create NaradCluster: %w", err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: naming.AdminSecret(nc)},
		Data:       map[string][]byte{naradv1.AdminPasswordKey: []byte(password)},
	}
	if err := c.Create(ctx, sec); err != nil {
		return nil, fmt.Errorf("create admin Secret: %w", err)
	}
	resolve := func(o *naradv1.NaradCluster, _ int32) string {
		if o.Namespace == ns && o.Name == name {
			return url
		}
		return Unreachable
	}
	return &Cluster{Object: nc, Resolver: brokers.ResolverFunc(resolve)}, nil
}

// Connector returns a Connector reaching the cluster's broker with credentials read by r.
func (c *Cluster) Connector(r ctrlclient.Reader) *brokers.Connector {
	return &brokers.Connector{Reader: r, Resolver: c.Resolver}
}
