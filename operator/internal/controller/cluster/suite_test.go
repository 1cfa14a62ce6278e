package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/internal/brokertest"
	"narad.dev/operator/naming"
	"narad.dev/operator/testsupport/suite"
)

// The suite runs the NaradCluster controller alone in a manager against envtest's
// kube-apiserver and etcd. There is no StatefulSet controller and no kubelet: specs that need
// pods create them (with revision labels and Ready conditions) the way those would.

const (
	// fakePassword is the admin password the fake brokers accept; specs that need the
	// brokers give their cluster an admin Secret holding it.
	fakePassword = "fake-admin-password"
	// statusInterval is the controller's settled refresh period in this suite.
	statusInterval = time.Second
	// rackImage is the operator image the rack init container runs in this suite.
	rackImage = "narad-operator:test"
	// waitTimeout bounds every Eventually of the suite.
	waitTimeout = 20 * time.Second
	pollEvery   = 100 * time.Millisecond
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	restCfg   *rest.Config
	k8sClient ctrlclient.Client
	scheme    *runtime.Scheme
	mgrDone   chan struct{}

	// fakeBrokers answers for every ordinal of every cluster; BeforeEach replaces it. The
	// controller's goroutines read it through currentFake.
	fakeBrokers *brokertest.Fake
	fakeMu      sync.Mutex

	// namespace is the current spec's namespace.
	namespace string
)

func currentFake() *brokertest.Fake {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	return fakeBrokers
}

func setFake(f *brokertest.Fake) {
	fakeMu.Lock()
	defer fakeMu.Unlock()
	fakeBrokers = f
}

func TestClusterController(t *testing.T) {
	SetDefaultEventuallyTimeout(waitTimeout)
	SetDefaultEventuallyPollingInterval(pollEvery)
	SetDefaultConsistentlyPollingInterval(pollEvery)
	suite.Run(t, "NaradCluster controller")
}

// envtestAssets is $KUBEBUILDER_ASSETS, or what hack/setup-envtest.sh (found at the root of
// the workspace, the directory holding go.work) prints.
func envtestAssets() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		Expect(parent).NotTo(Equal(dir), "no go.work above the test directory")
		dir = parent
	}
	cmd := exec.Command("bash", filepath.Join(dir, "hack", "setup-envtest.sh"))
	// envtest needs no kubectl; skipping it also skips the script's kubectl cache check,
	// whose `kubectl version | grep -q` pipeline fails now and then under pipefail.
	cmd.Env = append(os.Environ(), "NARAD_ENVTEST_KUBECTL=0")
	cmd.Stderr = GinkgoWriter
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "hack/setup-envtest.sh")
	return strings.TrimSpace(string(out))
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: envtestAssets(),
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	restCfg = cfg

	scheme = runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(naradv1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme)) // specs install a CRD of another project
	k8sClient, err = ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	resolver := brokers.ResolverFunc(func(*naradv1.NaradCluster, int32) string {
		if f := currentFake(); f != nil {
			return f.URL()
		}
		return "http://127.0.0.1:1"
	})
	r := &Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(),
		Brokers:  &brokers.Connector{Reader: mgr.GetClient(), Resolver: resolver, Timeout: 2 * time.Second},
		Recorder: mgr.GetEventRecorder("naradcluster-controller"), Image: "narad:test",
		RackImage:      rackImage,
		StatusInterval: statusInterval,
	}
	Expect(r.SetupWithManager(mgr)).To(Succeed())
	mgrDone = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if mgrDone != nil {
		Eventually(mgrDone).Should(BeClosed())
	}
	if f := currentFake(); f != nil {
		f.Close()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// defaultBrokers is what the fake serves unless a spec changes it: three voters, "<name>-0"
// leading, nothing moving.
func defaultBrokers(name string) brokertest.Cluster {
	var ms []client.Member
	for i := range 3 {
		id := name + "-" + strconv.Itoa(i)
		ms = append(ms, client.Member{ID: id, Status: client.StatusAlive, RaftRole: "voter", Leader: i == 0, OwnedPartitions: 4})
	}
	return brokertest.Cluster{Members: ms, Leader: name + "-0"}
}

var _ = BeforeEach(func() {
	f := brokertest.New(brokertest.Cluster{}, naming.AdminUser, fakePassword)
	old := currentFake()
	setFake(f)
	if old != nil {
		old.Close()
	}

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	namespace = "nc-" + hex.EncodeToString(b)
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	ns := namespace
	DeferCleanup(func() { cleanNamespace(ns) })
})

// cleanNamespace deletes what references clusters, then the clusters, and waits until the
// controller has let them go (envtest has no namespace controller to do it).
func cleanNamespace(ns string) {
	Expect(k8sClient.DeleteAllOf(ctx, &naradv1.Topic{}, ctrlclient.InNamespace(ns))).To(Succeed())
	Expect(k8sClient.DeleteAllOf(ctx, &naradv1.FanoutLink{}, ctrlclient.InNamespace(ns))).To(Succeed())
	Expect(k8sClient.DeleteAllOf(ctx, &naradv1.NaradCluster{}, ctrlclient.InNamespace(ns))).To(Succeed())
	Eventually(func(g Gomega) {
		var l naradv1.NaradClusterList
		g.Expect(k8sClient.List(ctx, &l, ctrlclient.InNamespace(ns))).To(Succeed())
		g.Expect(l.Items).To(BeEmpty())
	}).Should(Succeed())
}

// newCluster is a NaradCluster of three in the spec's namespace; opts adjust it.
func testCluster(name string, opts ...func(*naradv1.NaradCluster)) *naradv1.NaradCluster {
	nc := &naradv1.NaradCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       naradv1.NaradClusterSpec{Replicas: 3, InitialClusterSize: 3},
	}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

// withFakeAdmin points the cluster at an admin Secret holding the password the fake brokers
// accept (created by createSecret).
func withFakeAdmin(nc *naradv1.NaradCluster) {
	nc.Spec.Security.AdminSecretRef = &naradv1.SecretReference{Name: nc.Name + "-admin"}
	makeSecret(nc.Name+"-admin", map[string]string{naradv1.AdminPasswordKey: fakePassword})
}

func makeSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, StringData: data}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	return s
}

func mustCreate(obj ctrlclient.Object) {
	Expect(k8sClient.Create(ctx, obj)).To(Succeed())
}

// get reads namespace/name into obj, failing the spec on error.
func mustGet(name string, obj ctrlclient.Object) {
	ExpectWithOffset(1, k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, obj)).To(Succeed())
}

// eventually waits until namespace/name exists and reads it into obj.
func awaitObject(name string, obj ctrlclient.Object) {
	EventuallyWithOffset(1, func() error {
		return k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, obj)
	}).Should(Succeed())
}

func isAbsent(name string, obj ctrlclient.Object) bool {
	err := k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, obj)
	return apierrors.IsNotFound(err)
}

// eventReasons lists the reasons of the events recorded about the cluster name.
func eventReasons(name string) []string {
	var l eventsv1.EventList
	Expect(k8sClient.List(ctx, &l, ctrlclient.InNamespace(namespace))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		if e.Regarding.Kind == "NaradCluster" && e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// condition returns the condition t of the cluster as it is now (nil when absent).
func clusterCondition(name, t string) *metav1.Condition {
	var nc naradv1.NaradCluster
	mustGet(name, &nc)
	return findCondition(nc.Status.Conditions, t)
}

// haveCondition matches a *metav1.Condition with the given status and reason.
func haveCondition(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), WithTransform(func(c *metav1.Condition) string {
		return string(c.Status) + "/" + c.Reason
	}, Equal(string(status)+"/"+reason)))
}

// conditionMessage is the message of condition t of the cluster ("" while it is absent).
func conditionMessage(name, t string) string {
	if c := clusterCondition(name, t); c != nil {
		return c.Message
	}
	return ""
}

// mutate reads namespace/name into obj, applies fn and updates it, retrying on conflicts with
// the controller's own writes.
func mutate[T ctrlclient.Object](name string, obj T, fn func(T)) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8sClient.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
			return err
		}
		fn(obj)
		return k8sClient.Update(ctx, obj)
	}).Should(Succeed())
}
