package topic_test

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
	"narad.dev/operator/internal/controller/testenv"
	"narad.dev/operator/internal/controller/topic"
	"narad.dev/operator/naming"
	"narad.dev/operator/testsupport/suite"
)

// The suite runs the Topic controller alone against envtest and one real narad process on
// 127.0.0.51, reached through a resolver that maps every ordinal to it.
const (
	namespace   = "topic-suite"
	clusterName = "topics"
	brokerHost  = "127.0.0.51"
	password    = "topic-suite-admin"
	resync      = 2 * time.Second
)

var (
	k8s    ctrlclient.Client // uncached
	broker *client.Client    // admin client of the real broker
	nodeID string            // the broker's node ID (ordinal 0 of the cluster)
	env    *testenv.Cluster  // routes clusters to brokers; AddCluster adds fakes
)

func TestTopicController(t *testing.T) {
	suite.Run(t, "Topic controller")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	api, err := testenv.StartAPIServer()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(api.Stop)
	k8s = api.Client

	dir, err := os.MkdirTemp("", "topic-suite-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	bin, err := testenv.BuildNarad(dir)
	Expect(err).NotTo(HaveOccurred())
	nodeID = naming.NodeID(&naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}}, 0)
	b, err := testenv.StartBroker(bin, brokerHost, nodeID, password)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(b.Stop)
	broker = b.Client()

	ctx := context.Background()
	cl, err := testenv.CreateCluster(ctx, k8s, namespace, clusterName, password, b.URL)
	Expect(err).NotTo(HaveOccurred())
	env = cl

	mgr, err := api.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect((&topic.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Brokers: cl.Connector(mgr.GetClient()),
		Recorder: mgr.GetEventRecorder("topic-controller"), ResyncPeriod: resync,
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
