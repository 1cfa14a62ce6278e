// Package testenv bootstraps the controller suites: a real kube-apiserver and etcd (envtest)
// with the narad.dev CRDs, and real single-node narad brokers on loopback addresses, each
// standing for one or more NaradClusters the operator reaches through the Cluster's Resolver.
// It is imported by tests only.
package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	"narad.dev/operator/testsupport"
)

// RepoRoot is the directory holding go.work (testsupport.RepoRoot).
func RepoRoot() (string, error) { return testsupport.RepoRoot() }

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
	assets, err := testsupport.EnvtestAssets()
	if err != nil {
		return nil, err
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
	Resolver brokers.Resolver // every ordinal → the broker's URL; see AddCluster
	routes   *routes
}

// routes maps NaradClusters to the URL of the broker standing for them; any other cluster
// resolves to Unreachable. Safe for concurrent use (controllers resolve while specs add).
type routes struct {
	mu  sync.Mutex
	url map[types.NamespacedName]string
}

func (r *routes) PodURL(nc *naradv1.NaradCluster, _ int32) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u, ok := r.url[types.NamespacedName{Namespace: nc.Namespace, Name: nc.Name}]; ok {
		return u
	}
	return Unreachable
}

func (r *routes) add(nc *naradv1.NaradCluster, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.url[types.NamespacedName{Namespace: nc.Namespace, Name: nc.Name}] = url
}

// CreateCluster creates namespace ns (if needed), a one-replica NaradCluster named name and
// its admin Secret holding password. Its Resolver maps every ordinal of that cluster to the
// broker at url, and any other cluster to Unreachable.
func CreateCluster(ctx context.Context, c ctrlclient.Client, ns, name, password, url string) (*Cluster, error) {
	nc, err := createClusterObjects(ctx, c, ns, name, password)
	if err != nil {
		return nil, err
	}
	rt := &routes{url: map[types.NamespacedName]string{}}
	rt.add(nc, url)
	return &Cluster{Object: nc, Resolver: rt, routes: rt}, nil
}

// AddCluster creates one more NaradCluster ns/name (namespace included, if needed) with its
// admin Secret holding password, standing for the broker at url: c's Resolver maps every
// ordinal of it to url from now on. A second broker so added is, for example, the target of a
// remote fan-out link.
func (c *Cluster) AddCluster(ctx context.Context, k ctrlclient.Client, ns, name, password, url string) (*naradv1.NaradCluster, error) {
	nc, err := createClusterObjects(ctx, k, ns, name, password)
	if err != nil {
		return nil, err
	}
	c.routes.add(nc, url)
	return nc, nil
}

// createClusterObjects creates namespace ns (if needed), a one-replica NaradCluster and its
// admin Secret.
func createClusterObjects(ctx context.Context, c ctrlclient.Client, ns, name, password string) (*naradv1.NaradCluster, error) {
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
	return nc, nil
}

// Connector returns a Connector reaching the cluster's broker with credentials read by r.
func (c *Cluster) Connector(r ctrlclient.Reader) *brokers.Connector {
	return &brokers.Connector{Reader: r, Resolver: c.Resolver}
}
