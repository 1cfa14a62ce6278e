package fanoutlink_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/controller/fanoutlink"
	"narad.dev/operator/internal/controller/testenv"
	"narad.dev/operator/naming"
	"narad.dev/operator/testsupport/suite"
)

// The suite runs the FanoutLink controller alone against envtest and two real narad
// processes: the cluster of every parent on 127.0.0.52, and the target of remote links on
// 127.0.0.53, which stands for the NaradClusters targetName (same namespace) and
// farNamespace/farName. A resolver maps every ordinal of a cluster to its process.
const (
	namespace   = "fanoutlink-suite"
	clusterName = "links"
	brokerHost  = "127.0.0.52"
	password    = "fanoutlink-suite-admin"
	resync      = 2 * time.Second

	targetName     = "dr"
	farNamespace   = "fanoutlink-far"
	farName        = "far"
	targetHost     = "127.0.0.53"
	targetPassword = "fanoutlink-suite-target"
)

var (
	k8s       ctrlclient.Client // uncached
	broker    *client.Client    // admin client of the real broker
	nodeID    string            // the broker's node ID (ordinal 0 of the cluster)
	target    *client.Client    // admin client of the remote target broker
	targetURL string            // its base URL, http://127.0.0.53:port
)

func TestFanoutLinkController(t *testing.T) {
	suite.Run(t, "FanoutLink controller")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	api, err := testenv.StartAPIServer()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(api.Stop)
	k8s = api.Client

	dir, err := os.MkdirTemp("", "fanoutlink-suite-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	bin, err := testenv.BuildNarad(dir)
	Expect(err).NotTo(HaveOccurred())
	nodeID = naming.NodeID(&naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}}, 0)
	b, err := testenv.StartBroker(bin, brokerHost, nodeID, password)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(b.Stop)
	broker = b.Client()

	tb, err := testenv.StartBroker(bin, targetHost,
		naming.NodeID(&naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: targetName}}, 0), targetPassword)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(tb.Stop)
	target, targetURL = tb.Client(), tb.URL

	ctx := context.Background()
	cl, err := testenv.CreateCluster(ctx, k8s, namespace, clusterName, password, b.URL)
	Expect(err).NotTo(HaveOccurred())
	_, err = cl.AddCluster(ctx, k8s, namespace, targetName, targetPassword, tb.URL)
	Expect(err).NotTo(HaveOccurred())
	_, err = cl.AddCluster(ctx, k8s, farNamespace, farName, targetPassword, tb.URL)
	Expect(err).NotTo(HaveOccurred())

	mgr, err := api.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect((&fanoutlink.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Brokers: cl.Connector(mgr.GetClient()),
		Recorder: mgr.GetEventRecorder("fanoutlink-controller"), ResyncPeriod: resync,
	}).SetupWithManager(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(stopped).Should(BeClosed())
	})
})
