package user_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/internal/controller/testenv"
	"narad.dev/operator/internal/controller/user"
	"narad.dev/operator/naming"
	"narad.dev/operator/testsupport/suite"
)

// The suite runs the NaradUser controller alone against envtest and the fake admin API
// (brokertest), which keeps each user's password so a spec can see what the brokers were
// given. The end-to-end suite (test/operator/e2e) runs the same controller against real
// brokers.
const (
	namespace   = "user-suite"
	clusterName = "users"
	password    = "user-suite-admin"
	resync      = time.Second
)

var (
	k8s  ctrlclient.Client // uncached
	fake *brokertest.Fake  // the brokers of clusterName
	env  *testenv.Cluster  // routes clusters to brokers; AddCluster adds more
)

func TestUserController(t *testing.T) {
	suite.Run(t, "NaradUser controller")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	api, err := testenv.StartAPIServer()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(api.Stop)
	k8s = api.Client

	fake = brokertest.New(brokertest.Cluster{}, naming.AdminUser, password)
	DeferCleanup(fake.Close)
	ctx := context.Background()
	env, err = testenv.CreateCluster(ctx, k8s, namespace, clusterName, password, fake.URL())
	Expect(err).NotTo(HaveOccurred())

	mgr, err := api.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect((&user.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Brokers: env.Connector(mgr.GetClient()), Recorder: mgr.GetEventRecorder("naraduser-controller"),
		ResyncPeriod: resync,
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
