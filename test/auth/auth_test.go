package auth_test

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
)

var _ = Describe("Authentication", func() {
	DescribeTable("answers a request without valid credentials with 401 and a Basic challenge",
		func(method, path, authz string) {
			r := raw(method, path, "", "", authz, nil)
			body := expectJSONError(r, http.StatusUnauthorized)
			Expect(body["error"]).To(Equal("authentication required"))
			Expect(r.Header.Get("WWW-Authenticate")).To(Equal(`Basic realm="narad"`))
		},
		Entry("list topics, no header", "GET", "/v1/topics", ""),
		Entry("produce, no header", "POST", "/v1/topics/anything/produce", ""),
		Entry("users, no header", "GET", "/v1/users", ""),
		Entry("unknown route: authentication runs first", "GET", "/v1/not-a-route", ""),
		Entry("bearer scheme", "GET", "/v1/topics", "Bearer abc"),
		Entry("Basic with broken base64", "GET", "/v1/topics", "Basic !!!not-base64"),
		Entry("Basic without a colon", "GET", "/v1/topics", "Basic YWRtaW4="),
	)

	DescribeTable("serves the probe and metrics endpoints without credentials",
		func(path string) {
			r := raw(http.MethodGet, path, "", "", "", nil)
			Expect(r.Status).To(Equal(http.StatusOK))
		},
		Entry("liveness", "/healthz"),
		Entry("readiness", "/readyz"),
		Entry("metrics", "/metrics"),
	)

	It("answers an unknown user and a wrong password identically", func() {
		name := unique("known")
		newUser(name, "right-password", grant(client.ActionConsume, "x"))
		wrong := raw(http.MethodGet, "/v1/topics", name, "wrong-password", "", nil)
		unknown := raw(http.MethodGet, "/v1/topics", unique("ghost"), "whatever", "", nil)
		expectJSONError(wrong, http.StatusUnauthorized)
		expectJSONError(unknown, http.StatusUnauthorized)
		Expect(wrong.Body).To(Equal(unknown.Body))
		Expect(wrong.Header.Get("WWW-Authenticate")).To(Equal(unknown.Header.Get("WWW-Authenticate")))
	})

	It("lets the root admin do everything and makes it the owner of the topics it creates", func() {
		name := unique("root-topic")
		t := createTopic(root, name)
		Expect(t.Owner).To(Equal("admin"), "with security on the creator is the owner")
		Expect(root.Produce(ctx(5*time.Second), name, []byte("x"), client.ProduceOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			msgs, err := root.Consume(ctx(5*time.Second), name, client.ConsumeOptions{Wait: time.Second})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(msgs).To(HaveLen(1))
			g.Expect(root.Ack(ctx(5*time.Second), name, msgs[0].ReceiptHandle)).To(Succeed())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		users, err := root.ListUsers(ctx(5 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		Expect(users).NotTo(BeEmpty())
		Expect(users[0].Username).To(Equal("admin"))
		Expect(users[0].Root).To(BeTrue())
		Expect(root.DeleteTopic(ctx(5*time.Second), name)).To(Succeed())
	})

	It("throttles a username after 5 failed logins with 429, even for the right password, leaving others alone", func() {
		name := unique("throttled")
		newUser(name, "good-password", grant(client.ActionConsume, "x"))
		for i := 0; i < 5; i++ {
			expectJSONError(raw(http.MethodGet, "/v1/topics", name, "bad-password", "", nil), http.StatusUnauthorized)
		}
		r := raw(http.MethodGet, "/v1/topics", name, "bad-password", "", nil)
		body := expectJSONError(r, http.StatusTooManyRequests)
		Expect(body["error"]).To(Equal("too many failed authentication attempts"))
		Expect(r.Header.Get("Retry-After")).To(Equal("12"))
		expectJSONError(raw(http.MethodGet, "/v1/topics", name, "good-password", "", nil), http.StatusTooManyRequests)
		_, _, err := root.ListTopics(ctx(5*time.Second), 1, "")
		Expect(err).NotTo(HaveOccurred(), "another username is not throttled")
	})

	It("throttles an unknown username the same way, so the throttle does not reveal which users exist", func() {
		ghost := unique("ghost")
		for i := 0; i < 5; i++ {
			expectJSONError(raw(http.MethodGet, "/v1/topics", ghost, "x", "", nil), http.StatusUnauthorized)
		}
		expectJSONError(raw(http.MethodGet, "/v1/topics", ghost, "x", "", nil), http.StatusTooManyRequests)
	})
})

var _ = Describe("Authorization", func() {
	It("limits a produce-only user on orders* to producing to matching topics", func() {
		orders := unique("orders")
		payments := unique("payments")
		createTopic(root, orders)
		createTopic(root, payments)
		u := newUser(unique("producer"), "p-pass", grant(client.ActionProduce, "orders*"))

		Expect(u.Produce(ctx(5*time.Second), orders, []byte("ok"), client.ProduceOptions{})).To(Succeed())
		n, err := u.ProduceBatch(ctx(5*time.Second), orders, []client.BatchRecord{client.NewBatchRecord("", []byte("b"))})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		Expect(statusOf(u.Produce(ctx(5*time.Second), payments, []byte("no"), client.ProduceOptions{}))).To(Equal(http.StatusForbidden))
		Expect(statusOf(u.Produce(ctx(5*time.Second), unique("elsewhere"), []byte("no"), client.ProduceOptions{}))).
			To(Equal(http.StatusForbidden), "grant checks are name-based: 403 even for a topic that does not exist")
		Expect(statusOf(u.Produce(ctx(5*time.Second), unique("orders-absent"), []byte("x"), client.ProduceOptions{}))).
			To(Equal(http.StatusNotFound), "a matching grant passes, then the topic is missing")

		_, err = u.Consume(ctx(5*time.Second), orders, client.ConsumeOptions{})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "produce does not imply consume")
		Expect(statusOf(u.Ack(ctx(5*time.Second), orders, "0:0:1"))).To(Equal(http.StatusForbidden), "ack rights come with consume")
		_, err = u.CreateTopic(ctx(5*time.Second), client.CreateTopicRequest{Name: unique("orders-new")})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "creating needs the create grant")
		Expect(statusOf(u.DeleteTopic(ctx(5*time.Second), orders))).To(Equal(http.StatusForbidden), "not the owner")
		_, err = u.AlterTopic(ctx(5*time.Second), orders, client.AlterTopicRequest{VisibilityTimeoutMs: ptr(int64(5000))})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden))
		_, err = u.ListUsers(ctx(5 * time.Second))
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "user management needs admin")

		_, _, err = u.ListTopics(ctx(5*time.Second), 10, "")
		Expect(err).NotTo(HaveOccurred(), "any authenticated user may list")
		_, err = u.GetTopic(ctx(5*time.Second), payments, nil)
		Expect(err).NotTo(HaveOccurred(), "any authenticated user may describe")
	})

	It("matches a literal pattern only to that exact name", func() {
		exact := unique("exact")
		createTopic(root, exact)
		createTopic(root, exact+"0")
		u := newUser(unique("consumer"), "c-pass", grant(client.ActionConsume, exact))
		_, err := u.Consume(ctx(5*time.Second), exact, client.ConsumeOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = u.Consume(ctx(5*time.Second), exact+"0", client.ConsumeOptions{})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden))
		Expect(statusOf(u.Produce(ctx(5*time.Second), exact, []byte("x"), client.ProduceOptions{}))).To(Equal(http.StatusForbidden))
	})

	It("makes a creator the owner, with manage rights on its own topics only", func() {
		prefix := unique("team")
		u := newUser(unique("creator"), "cr-pass", grant(client.ActionCreate, prefix+"*"))
		mine, err := u.CreateTopic(ctx(5*time.Second), client.CreateTopicRequest{Name: prefix + "-a"})
		Expect(err).NotTo(HaveOccurred())
		Expect(mine.Owner).NotTo(BeEmpty())
		theirs := prefix + "-b"
		createTopic(root, theirs)

		_, err = u.AlterTopic(ctx(5*time.Second), mine.Name, client.AlterTopicRequest{VisibilityTimeoutMs: ptr(int64(5000))})
		Expect(err).NotTo(HaveOccurred(), "the owner may alter without any other grant")
		_, err = u.AlterTopic(ctx(5*time.Second), theirs, client.AlterTopicRequest{VisibilityTimeoutMs: ptr(int64(5000))})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden))
		Expect(statusOf(u.DeleteTopic(ctx(5*time.Second), theirs))).To(Equal(http.StatusForbidden))
		Expect(statusOf(u.DeleteTopic(ctx(5*time.Second), prefix+"-absent"))).
			To(Equal(http.StatusNotFound), "a manage check on a missing topic passes, then 404")
		Expect(u.DeleteTopic(ctx(5*time.Second), mine.Name)).To(Succeed())
		_, err = u.CreateTopic(ctx(5*time.Second), client.CreateTopicRequest{Name: unique("other")})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "create is limited to its patterns")
	})

	It("applies a grant change on the very next request", func() {
		topic := unique("regrant")
		createTopic(root, topic)
		name := unique("regranted")
		u := newUser(name, "g-pass", grant(client.ActionProduce, topic))
		Expect(u.Produce(ctx(5*time.Second), topic, []byte("x"), client.ProduceOptions{})).To(Succeed())
		_, err := root.SetGrants(ctx(5*time.Second), name, []client.Grant{grant(client.ActionConsume, topic)})
		Expect(err).NotTo(HaveOccurred())
		Expect(statusOf(u.Produce(ctx(5*time.Second), topic, []byte("x"), client.ProduceOptions{}))).To(Equal(http.StatusForbidden))
		_, err = u.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{})
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("User management", func() {
	It("lets only the root admin hand out admin, and stops a non-root admin from escalating", func() {
		opsName := unique("ops")
		ops := newUser(opsName, "ops-pass", client.Grant{Action: client.ActionAdmin})

		_, err := ops.CreateUser(ctx(5*time.Second), client.CreateUserRequest{
			Username: unique("wannabe"), Password: "x", Grants: []client.Grant{{Action: client.ActionAdmin}},
		})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "a non-root admin cannot grant admin")

		worker := unique("worker")
		_, err = ops.CreateUser(ctx(5*time.Second), client.CreateUserRequest{
			Username: worker, Password: "w-pass", Grants: []client.Grant{grant(client.ActionProduce, "jobs*")},
		})
		Expect(err).NotTo(HaveOccurred(), "a non-root admin may hand out scoped grants")
		_, err = ops.SetGrants(ctx(5*time.Second), worker, []client.Grant{{Action: client.ActionAdmin}})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden))
		got, err := ops.SetGrants(ctx(5*time.Second), worker, []client.Grant{grant(client.ActionConsume, "jobs*")})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Grants).To(Equal([]client.Grant{grant(client.ActionConsume, "jobs*")}))

		_, err = ops.SetGrants(ctx(5*time.Second), opsName, []client.Grant{grant(client.ActionProduce, "*")})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "nobody changes their own grants")
		_, err = ops.SetGrants(ctx(5*time.Second), "admin", nil)
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "root's grants are immutable")
		Expect(statusOf(ops.SetPassword(ctx(5*time.Second), "admin", "taken-over", ""))).
			To(Equal(http.StatusForbidden), "only root changes root's password")
		Expect(statusOf(ops.DeleteUser(ctx(5*time.Second), "admin"))).To(Equal(http.StatusForbidden))
		Expect(statusOf(ops.DeleteUser(ctx(5*time.Second), opsName))).To(Equal(http.StatusForbidden), "nobody deletes themselves")
		_, _, err = root.ListTopics(ctx(5*time.Second), 1, "")
		Expect(err).NotTo(HaveOccurred(), "root's password is unchanged")

		w := as(worker, "w-pass")
		_, err = w.CreateUser(ctx(5*time.Second), client.CreateUserRequest{Username: unique("sub"), Password: "x"})
		Expect(statusOf(err)).To(Equal(http.StatusForbidden), "user endpoints need admin")

		second := unique("second-admin")
		_, err = root.CreateUser(ctx(5*time.Second), client.CreateUserRequest{
			Username: second, Password: "x", Grants: []client.Grant{{Action: client.ActionAdmin}},
		})
		Expect(err).NotTo(HaveOccurred(), "root may hand out admin")
		Expect(ops.DeleteUser(ctx(5*time.Second), worker)).To(Succeed())
		_, err = root.GetUser(ctx(5*time.Second), worker)
		Expect(statusOf(err)).To(Equal(http.StatusNotFound))
	})

	It("applies an admin's password change on the next request", func() {
		name := unique("pw")
		newUser(name, "old-pass", grant(client.ActionConsume, "x"))
		_, _, err := as(name, "old-pass").ListTopics(ctx(5*time.Second), 1, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(root.SetPassword(ctx(5*time.Second), name, "new-pass", "")).To(Succeed())
		_, _, err = as(name, "old-pass").ListTopics(ctx(5*time.Second), 1, "")
		Expect(statusOf(err)).To(Equal(http.StatusUnauthorized), "the old password stops working at once")
		_, _, err = as(name, "new-pass").ListTopics(ctx(5*time.Second), 1, "")
		Expect(err).NotTo(HaveOccurred())
	})

	It("lets a user change its own password only with the current one", func() {
		name := unique("self")
		u := newUser(name, "first-pass", grant(client.ActionConsume, "x"))
		Expect(statusOf(u.SetPassword(ctx(5*time.Second), name, "second-pass", "not-the-current"))).To(Equal(http.StatusForbidden))
		Expect(u.SetPassword(ctx(5*time.Second), name, "second-pass", "first-pass")).To(Succeed())
		_, _, err := as(name, "first-pass").ListTopics(ctx(5*time.Second), 1, "")
		Expect(statusOf(err)).To(Equal(http.StatusUnauthorized))
		_, _, err = as(name, "second-pass").ListTopics(ctx(5*time.Second), 1, "")
		Expect(err).NotTo(HaveOccurred())
		other := unique("other")
		newUser(other, "o-pass", grant(client.ActionConsume, "x"))
		Expect(statusOf(as(name, "second-pass").SetPassword(ctx(5*time.Second), other, "hijack", "o-pass"))).
			To(Equal(http.StatusForbidden), "a non-admin cannot change someone else's password")
	})

	It("never returns a password hash and answers 409 for an existing username", func() {
		name := unique("plain")
		newUser(name, "secret-pass", grant(client.ActionProduce, "a*"))
		r := raw(http.MethodGet, "/v1/users/"+name, "admin", rootPassword, "", nil)
		Expect(r.Status).To(Equal(http.StatusOK))
		Expect(string(r.Body)).NotTo(ContainSubstring("secret-pass"))
		Expect(string(r.Body)).NotTo(ContainSubstring("$2"), "no bcrypt hash")
		Expect(string(r.Body)).NotTo(ContainSubstring("password"))
		_, err := root.CreateUser(ctx(5*time.Second), client.CreateUserRequest{Username: name, Password: "x"})
		Expect(statusOf(err)).To(Equal(http.StatusConflict))
	})
})

func ptr[T any](v T) *T { return &v }
