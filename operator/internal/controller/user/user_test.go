package user_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/internal/brokertest"
)

// newUser builds a NaradUser of the suite's cluster; spec.username is left empty
// (metadata.name).
func newUser(name string, mutate func(*naradv1.NaradUser)) *naradv1.NaradUser {
	u := &naradv1.NaradUser{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       naradv1.NaradUserSpec{ClusterRef: naradv1.ClusterReference{Name: clusterName}},
	}
	if mutate != nil {
		mutate(u)
	}
	return u
}

func key(name string) ctrlclient.ObjectKey {
	return ctrlclient.ObjectKey{Namespace: namespace, Name: name}
}

// get reads a NaradUser; use it inside Eventually.
func get(ctx context.Context, name string) func(Gomega) *naradv1.NaradUser {
	return func(g Gomega) *naradv1.NaradUser {
		var u naradv1.NaradUser
		g.Expect(k8s.Get(ctx, key(name), &u)).To(Succeed())
		return &u
	}
}

// ready returns a NaradUser's Ready condition (nil when absent).
func ready(ctx context.Context, name string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		return apimeta.FindStatusCondition(get(ctx, name)(g).Status.Conditions, naradv1.ConditionReady)
	}
}

// secret reads a Secret's data; use it inside Eventually.
func secret(ctx context.Context, name string) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		var s corev1.Secret
		g.Expect(k8s.Get(ctx, key(name), &s)).To(Succeed())
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out
	}
}

// brokerUser reads the fake's user; use it inside Eventually.
func brokerUser(name string) func(Gomega) brokertest.User {
	return func(g Gomega) brokertest.User {
		u, ok := fake.User(name)
		g.Expect(ok).To(BeTrue(), "broker user %q exists", name)
		return u
	}
}

// eventNotes lists the reasons and notes of the events recorded on the NaradUser name.
func eventNotes(ctx context.Context, name string) func(Gomega) []string {
	return func(g Gomega) []string {
		var list eventsv1.EventList
		g.Expect(k8s.List(ctx, &list, ctrlclient.InNamespace(namespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "NaradUser" && e.Regarding.Name == name {
				out = append(out, e.Reason+": "+e.Note)
			}
		}
		return out
	}
}

// gone reports whether the NaradUser name no longer exists.
func gone(ctx context.Context, name string) func() bool {
	return func() bool {
		var u naradv1.NaradUser
		return apierrors.IsNotFound(k8s.Get(ctx, key(name), &u))
	}
}

var produceOrders = []naradv1.UserGrant{
	{Action: naradv1.GrantProduce, Patterns: []string{"orders"}},
	{Action: naradv1.GrantConsume, Patterns: []string{"orders-*", "audit"}},
}

var _ = Describe("NaradUser controller", func() {
	It("creates the broker user with the spec's grants and a generated password in an owned Secret", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("alice", func(u *naradv1.NaradUser) { u.Spec.Grants = produceOrders }))).To(Succeed())

		Eventually(ready(ctx, "alice")).Should(HaveField("Status", metav1.ConditionTrue))
		u := get(ctx, "alice")(Default)
		Expect(u.Spec.Username).To(Equal("alice"), "spec.username written back")
		Expect(u.Finalizers).To(ContainElement(naradv1.NaradUserFinalizer))
		Expect(u.Status.Username).To(Equal("alice"))
		Expect(u.Status.SecretName).To(Equal("alice-narad-user"))
		Expect(u.Status.ObservedGeneration).To(Equal(u.Generation))

		bu := brokerUser("alice")(Default)
		Expect(bu.Grants).To(Equal([]client.Grant{
			{Action: "produce", Patterns: []string{"orders"}},
			{Action: "consume", Patterns: []string{"orders-*", "audit"}},
		}))
		data := secret(ctx, "alice-narad-user")(Default)
		Expect(data).To(Equal(map[string]string{
			"username": "alice", "password": bu.Password, "url": "http://users.user-suite.svc:7942",
		}))
		Expect(len(bu.Password)).To(BeNumerically(">=", 26), "a generated password has at least 128 bits")

		var s corev1.Secret
		Expect(k8s.Get(ctx, key("alice-narad-user"), &s)).To(Succeed())
		Expect(metav1.IsControlledBy(&s, u)).To(BeTrue(), "the NaradUser owns its Secret")

		Eventually(eventNotes(ctx, "alice")).Should(ContainElement(HavePrefix("Created:")))
		for _, n := range eventNotes(ctx, "alice")(Default) {
			Expect(n).NotTo(ContainSubstring(bu.Password), "no event carries the password")
		}
		Expect(u.Status.PasswordSecretVersion).NotTo(ContainSubstring(bu.Password))
	})

	It("generates a new password, brokers first, when the generated Secret is deleted", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("rotor", nil))).To(Succeed())
		Eventually(secret(ctx, "rotor-narad-user")).Should(HaveKey("password"))
		old := secret(ctx, "rotor-narad-user")(Default)["password"]
		Eventually(brokerUser("rotor")).Should(HaveField("Password", old))

		var s corev1.Secret
		Expect(k8s.Get(ctx, key("rotor-narad-user"), &s)).To(Succeed())
		Expect(k8s.Delete(ctx, &s)).To(Succeed())

		Eventually(func(g Gomega) {
			pw := secret(ctx, "rotor-narad-user")(g)["password"]
			g.Expect(pw).NotTo(BeEmpty())
			g.Expect(pw).NotTo(Equal(old), "a new password")
			g.Expect(brokerUser("rotor")(g).Password).To(Equal(pw), "the brokers have the Secret's password")
		}).Should(Succeed())
		Eventually(eventNotes(ctx, "rotor")).Should(ContainElement(HavePrefix("PasswordChanged:")))
		Eventually(ready(ctx, "rotor")).Should(HaveField("Status", metav1.ConditionTrue))
	})

	It("gives the brokers a password written into the generated Secret, and replaces an empty one", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("hand", nil))).To(Succeed())
		Eventually(ready(ctx, "hand")).Should(HaveField("Status", metav1.ConditionTrue))
		setPassword := func(pw string) {
			var s corev1.Secret
			Expect(k8s.Get(ctx, key("hand-narad-user"), &s)).To(Succeed())
			s.Data["password"] = []byte(pw)
			Expect(k8s.Update(ctx, &s)).To(Succeed())
		}

		setPassword("typed-by-hand")
		Eventually(brokerUser("hand")).Should(HaveField("Password", "typed-by-hand"))

		setPassword("")
		Eventually(func(g Gomega) {
			pw := secret(ctx, "hand-narad-user")(g)["password"]
			g.Expect(pw).NotTo(BeElementOf("", "typed-by-hand"))
			g.Expect(brokerUser("hand")(g).Password).To(Equal(pw))
		}).Should(Succeed())
	})

	It("writes no Secret while the brokers cannot take the new password", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("outage", nil))).To(Succeed())
		Eventually(ready(ctx, "outage")).Should(HaveField("Status", metav1.ConditionTrue))
		old := brokerUser("outage")(Default).Password

		fake.Update(func(c *brokertest.Cluster) { c.NoQuorum = true })
		DeferCleanup(fake.Update, func(c *brokertest.Cluster) { c.NoQuorum = false })
		var s corev1.Secret
		Expect(k8s.Get(ctx, key("outage-narad-user"), &s)).To(Succeed())
		Expect(k8s.Delete(ctx, &s)).To(Succeed())
		Eventually(ready(ctx, "outage")).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", "BrokerError")))
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key("outage-narad-user"), &corev1.Secret{}))
		}, "2s").Should(BeTrue(), "no Secret holds a password the brokers do not have")
		Expect(brokerUser("outage")(Default).Password).To(Equal(old))

		fake.Update(func(c *brokertest.Cluster) { c.NoQuorum = false })
		Eventually(func(g Gomega) {
			pw := secret(ctx, "outage-narad-user")(g)["password"]
			g.Expect(pw).NotTo(Equal(old))
			g.Expect(brokerUser("outage")(g).Password).To(Equal(pw))
		}).Should(Succeed())
	})

	It("puts back grants changed on the brokers and follows a grant change in the spec", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("drift", func(u *naradv1.NaradUser) { u.Spec.Grants = produceOrders }))).To(Succeed())
		Eventually(ready(ctx, "drift")).Should(HaveField("Status", metav1.ConditionTrue))

		fake.Update(func(c *brokertest.Cluster) {
			for i := range c.Users {
				if c.Users[i].Username == "drift" {
					c.Users[i].Grants = []client.Grant{{Action: "admin"}}
				}
			}
		})
		Eventually(brokerUser("drift")).Should(HaveField("Grants", HaveLen(2)), "put back within a resync")
		Expect(brokerUser("drift")(Default).Grants[0]).To(Equal(client.Grant{Action: "produce", Patterns: []string{"orders"}}))
		Eventually(eventNotes(ctx, "drift")).Should(ContainElement(HavePrefix("GrantsSet:")))

		var u naradv1.NaradUser
		Expect(k8s.Get(ctx, key("drift"), &u)).To(Succeed())
		u.Spec.Grants = []naradv1.UserGrant{{Action: naradv1.GrantCreate, Patterns: []string{"tmp-*"}}}
		Expect(k8s.Update(ctx, &u)).To(Succeed())
		Eventually(brokerUser("drift")).Should(HaveField("Grants",
			Equal([]client.Grant{{Action: "create", Patterns: []string{"tmp-*"}}})))
	})

	It("takes the password from a user-supplied Secret, waits for it, and applies its changes", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("bob", func(u *naradv1.NaradUser) {
			u.Spec.PasswordSecretRef = &naradv1.PasswordSecretReference{Name: "bob-password", Key: "pw"}
		}))).To(Succeed())
		Eventually(ready(ctx, "bob")).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", "PasswordSecretNotFound")))
		_, exists := fake.User("bob")
		Expect(exists).To(BeFalse(), "no broker user without a password")

		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bob-password"},
			Data: map[string][]byte{"pw": []byte(strings.Repeat("x", 73))}}
		Expect(k8s.Create(ctx, sec)).To(Succeed())
		Eventually(ready(ctx, "bob")).Should(HaveField("Reason", "PasswordInvalid"), "73 bytes is over the brokers' limit")

		sec.Data["pw"] = []byte("first-secret")
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		Eventually(brokerUser("bob")).Should(HaveField("Password", "first-secret"))
		Eventually(ready(ctx, "bob")).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(get(ctx, "bob")(Default).Status.SecretName).To(Equal("bob-password"))
		var generated corev1.Secret
		Expect(apierrors.IsNotFound(k8s.Get(ctx, key("bob-narad-user"), &generated))).To(BeTrue(), "no generated Secret")

		Expect(k8s.Get(ctx, key("bob-password"), sec)).To(Succeed())
		sec.Data["pw"] = []byte("second-secret")
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		Eventually(brokerUser("bob")).Should(HaveField("Password", "second-secret"))
	})

	It("deletes the broker user with the object", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("carol", nil))).To(Succeed())
		Eventually(brokerUser("carol")).Should(HaveField("Username", "carol"))
		Eventually(get(ctx, "carol")).Should(HaveField("Finalizers", ContainElement(naradv1.NaradUserFinalizer)))

		Expect(k8s.Delete(ctx, newUser("carol", nil))).To(Succeed())
		Eventually(gone(ctx, "carol")).Should(BeTrue())
		_, exists := fake.User("carol")
		Expect(exists).To(BeFalse(), "the broker user is deleted")
	})

	It("releases the object without blocking when its NaradCluster is gone", func(ctx SpecContext) {
		nc, err := env.AddCluster(ctx, k8s, namespace, "doomed", password, fake.URL())
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, newUser("dave", func(u *naradv1.NaradUser) { u.Spec.ClusterRef.Name = "doomed" }))).To(Succeed())
		Eventually(ready(ctx, "dave")).Should(HaveField("Status", metav1.ConditionTrue))

		Expect(k8s.Delete(ctx, nc)).To(Succeed())
		Expect(k8s.Delete(ctx, newUser("dave", nil))).To(Succeed())
		Eventually(gone(ctx, "dave")).Should(BeTrue())
	})

	It("reports a cluster it cannot find, and a Secret name it does not own", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("erin", func(u *naradv1.NaradUser) { u.Spec.ClusterRef.Name = "nowhere" }))).To(Succeed())
		Eventually(ready(ctx, "erin")).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", "ClusterNotFound")))

		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "frank-narad-user"},
			Data: map[string][]byte{"password": []byte("not-yours")}})).To(Succeed())
		Expect(k8s.Create(ctx, newUser("frank", nil))).To(Succeed())
		Eventually(ready(ctx, "frank")).Should(HaveField("Reason", "SecretConflict"))
		Expect(secret(ctx, "frank-narad-user")(Default)).To(Equal(map[string]string{"password": "not-yours"}))
	})

	It("leaves a broker user to the oldest of two NaradUsers naming it", func(ctx SpecContext) {
		shared := func(u *naradv1.NaradUser) { u.Spec.Username = "shared" }
		Expect(k8s.Create(ctx, newUser("dup-a", shared))).To(Succeed())
		Eventually(ready(ctx, "dup-a")).Should(HaveField("Status", metav1.ConditionTrue))
		pw := brokerUser("shared")(Default).Password

		Expect(k8s.Create(ctx, newUser("dup-b", shared))).To(Succeed())
		Eventually(ready(ctx, "dup-b")).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", "DuplicateUsername"), HaveField("Message", ContainSubstring(`"dup-a"`))))
		Expect(brokerUser("shared")(Default).Password).To(Equal(pw), "the younger object changed nothing")

		Expect(k8s.Delete(ctx, newUser("dup-b", nil))).To(Succeed())
		Eventually(gone(ctx, "dup-b")).Should(BeTrue())
		Expect(brokerUser("shared")(Default).Password).To(Equal(pw), "deleting the younger object keeps the user")
	})

	DescribeTable("the API server refuses a bad spec",
		func(ctx SpecContext, name string, mutate func(*naradv1.NaradUser), want string) {
			err := k8s.Create(ctx, newUser(name, mutate))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("the root admin by name", "admin", nil, "the root admin cannot be a NaradUser"),
		Entry("the root admin by username", "root-alias", func(u *naradv1.NaradUser) { u.Spec.Username = "admin" },
			"the root admin cannot be a NaradUser"),
		Entry("a username the brokers refuse", "badname", func(u *naradv1.NaradUser) { u.Spec.Username = "no/slash" },
			"spec.username"),
		Entry("admin with patterns", "adm", func(u *naradv1.NaradUser) {
			u.Spec.Grants = []naradv1.UserGrant{{Action: naradv1.GrantAdmin, Patterns: []string{"x"}}}
		}, "admin takes no patterns"),
		Entry("produce without patterns", "prod", func(u *naradv1.NaradUser) {
			u.Spec.Grants = []naradv1.UserGrant{{Action: naradv1.GrantProduce}}
		}, "need at least one"),
		Entry("an unknown action", "reader", func(u *naradv1.NaradUser) {
			u.Spec.Grants = []naradv1.UserGrant{{Action: "read", Patterns: []string{"x"}}}
		}, "Unsupported value"),
		Entry("a star inside a pattern", "star", func(u *naradv1.NaradUser) {
			u.Spec.Grants = []naradv1.UserGrant{{Action: naradv1.GrantConsume, Patterns: []string{"a*b"}}}
		}, "spec.grants[0].patterns[0]"),
	)

	It("refuses a change of username or cluster", func(ctx SpecContext) {
		Expect(k8s.Create(ctx, newUser("grace", func(u *naradv1.NaradUser) { u.Spec.ClusterRef.Name = "nowhere" }))).To(Succeed())
		Eventually(get(ctx, "grace")).Should(HaveField("Spec.Username", "grace"))
		u := get(ctx, "grace")(Default)
		u.Spec.Username = "grace2"
		err := k8s.Update(ctx, u)
		Expect(err).To(MatchError(ContainSubstring("username is immutable once set")))
		u = get(ctx, "grace")(Default)
		u.Spec.ClusterRef.Name = clusterName
		Expect(k8s.Update(ctx, u)).To(MatchError(ContainSubstring("clusterRef is immutable")))
	})
})
