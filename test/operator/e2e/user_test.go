package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
)

var _ = Describe("A NaradUser on real brokers with authentication on", Ordered, func() {
	const (
		granted  = "granted"
		refused  = "refused"
		username = "writer"
	)
	var (
		ctx    context.Context
		cancel context.CancelFunc
		nc     *naradv1.NaradCluster
		ncKey  types.NamespacedName
		admin  *client.Client
	)

	BeforeAll(func() {
		ctx, cancel = context.WithCancel(context.Background())
		DeferCleanup(func() { cancel() })
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-user-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		size := resource.MustParse("1Gi")
		nc = &naradv1.NaradCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns.Name},
			Spec: naradv1.NaradClusterSpec{Replicas: 1, InitialClusterSize: 1,
				Storage: naradv1.StorageSpec{Size: &size}, Broker: naradv1.BrokerConfig{ExtraArgs: brokerArgs}},
		}
		ncKey = types.NamespacedName{Namespace: ns.Name, Name: nc.Name}
	})

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			dumpCluster(nc, nil, nil)
		}
	})

	It("creates the user with its grants and a Secret that logs in", func() {
		Expect(k8s.Create(ctx, nc)).To(Succeed())
		for _, name := range []string{granted, refused} {
			Expect(k8s.Create(ctx, &naradv1.Topic{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nc.Namespace},
				Spec:       naradv1.TopicSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name}, Partitions: 3},
			})).To(Succeed())
		}
		Expect(k8s.Create(ctx, &naradv1.NaradUser{
			ObjectMeta: metav1.ObjectMeta{Name: username, Namespace: nc.Namespace},
			Spec: naradv1.NaradUserSpec{ClusterRef: naradv1.ClusterReference{Name: nc.Name},
				Grants: []naradv1.UserGrant{{Action: naradv1.GrantProduce, Patterns: []string{granted}}}},
		})).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(meta.IsStatusConditionTrue(getCluster(g, ncKey).Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "cluster Ready")
			for _, name := range []string{granted, refused} {
				var t naradv1.Topic
				g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: name}, &t)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "topic %s Ready", name)
			}
			var u naradv1.NaradUser
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: username}, &u)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(u.Status.Conditions, naradv1.ConditionReady)).To(BeTrue(), "user Ready: %v", u.Status.Conditions)
		}).WithTimeout(120 * time.Second).WithPolling(time.Second).Should(Succeed())

		var err error
		admin, err = (&brokers.Connector{Reader: k8s, Resolver: resolver}).Pod(ctx, getClusterNow(ncKey), 0)
		Expect(err).NotTo(HaveOccurred())
		bu, err := admin.GetUser(ctx, username)
		Expect(err).NotTo(HaveOccurred())
		Expect(bu.Grants).To(Equal([]client.Grant{{Action: "produce", Patterns: []string{granted}}}))
	})

	It("lets the Secret's credentials produce to the granted topic and refuses them (403) on another", func() {
		var sec corev1.Secret
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: nc.Namespace, Name: username + naradv1.UserSecretSuffix}, &sec)).To(Succeed())
		Expect(string(sec.Data[naradv1.UserSecretUsernameKey])).To(Equal(username))
		Expect(string(sec.Data[naradv1.UserSecretURLKey])).To(Equal("http://keys." + nc.Namespace + ".svc:7942"))
		cl, err := client.New(resolver.PodURL(getClusterNow(ncKey), 0), client.WithTimeout(10*time.Second),
			client.WithBasicAuth(string(sec.Data[naradv1.UserSecretUsernameKey]), string(sec.Data[naradv1.UserSecretPasswordKey])))
		Expect(err).NotTo(HaveOccurred())

		Expect(cl.Produce(ctx, granted, []byte(`{"n":1}`), client.ProduceOptions{})).To(Succeed())
		err = cl.Produce(ctx, refused, []byte(`{"n":1}`), client.ProduceOptions{})
		Expect(client.IsStatus(err, 403)).To(BeTrue(), "want 403, got %v", err)
	})

	It("deletes the broker user with the object", func() {
		Expect(k8s.Delete(ctx, &naradv1.NaradUser{ObjectMeta: metav1.ObjectMeta{Name: username, Namespace: nc.Namespace}})).To(Succeed())
		Eventually(func() bool {
			_, err := admin.GetUser(ctx, username)
			return client.IsStatus(err, 404)
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(BeTrue())
	})
})
