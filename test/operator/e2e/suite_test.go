// Package e2e is the operator's end-to-end suite: a real kube-apiserver and etcd (envtest), the
// operator running in-process, and the StatefulSet's pods played by real narad processes on
// 127.0.0.x (podrunner). The operator reaches the brokers through a resolver that maps ordinals
// to the runner's addresses.
//
// Run from test/ with a narad binary built from the current tree:
//
//	NARAD_BIN=/path/to/narad go test -race -count=1 ./operator/e2e
package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/brokers"
	"narad.dev/operator/manager"
	"narad.dev/operator/naming"
	"narad.dev/operator/testsupport"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/operator/podrunner"
)

// Timing of the operator under test: fast enough for a suite, slow enough to be realistic.
const (
	statusInterval = 2 * time.Second
	resyncPeriod   = 5 * time.Second
	// e2eZone is the zone label of the pod runner's node: every broker's rack.
	e2eZone = "e2e-zone-a"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8s       ctrlclient.Client // uncached: every read is the API server's current state
	runner    *podrunner.Runner
	resolver  brokers.Resolver
	stopSuite context.CancelFunc
	mgrDone   = make(chan error, 1)
	runDone   = make(chan error, 1)
)

func TestOperatorEndToEnd(t *testing.T) {
	suite.Run(t, "operator end-to-end (real brokers)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	assets, err := testsupport.EnvtestAssets()
	Expect(err).NotTo(HaveOccurred())
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = ctrlclient.New(cfg, ctrlclient.Options{Scheme: manager.NewScheme()})
	Expect(err).NotTo(HaveOccurred())

	ctx, cancel := context.WithCancel(context.Background())
	stopSuite = cancel
	runner, err = podrunner.New(cfg, podrunner.Options{Zone: e2eZone, Logf: func(f string, a ...any) {
		GinkgoWriter.Printf(time.Now().Format("15:04:05.000")+" "+f+"\n", a...)
	}})
	Expect(err).NotTo(HaveOccurred())
	go func() { runDone <- runner.Run(ctx) }()

	resolver = brokers.ResolverFunc(func(nc *naradv1.NaradCluster, i int32) string {
		return "http://" + runner.IP(nc.Namespace, naming.StatefulSet(nc), i) + ":7942"
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  manager.NewScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(manager.Setup(mgr, manager.Options{
		Resolver: resolver, StatusInterval: statusInterval, ResyncPeriod: resyncPeriod, Image: "narad:test",
		// The pods get the rack init container, which the pod runner runs in-process.
		RackImage: "narad-operator:test",
	})).To(Succeed())
	go func() { mgrDone <- mgr.Start(ctx) }()
})

var _ = AfterSuite(func() {
	if stopSuite != nil {
		stopSuite()
		Eventually(mgrDone, 30*time.Second).Should(Receive(BeNil()), "the manager stops cleanly")
	}
	if runner != nil {
		runner.Stop()
		Eventually(runDone, 10*time.Second).Should(Receive(BeNil()), "the pod runner stops cleanly")
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
