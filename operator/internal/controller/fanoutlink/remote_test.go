package fanoutlink_test

import (
	"context"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// newRemoteLink is a FanoutLink from parent on the suite's cluster to remote.
func newRemoteLink(name, parent string, remote naradv1.FanoutRemote) *naradv1.FanoutLink {
	return newLink(name, parent, "", func(fl *naradv1.FanoutLink) { fl.Spec.Remote = &remote })
}

// remoteID is the brokers' id of a link into topic on the target broker.
func remoteID(topic string) string {
	u, err := url.Parse(targetURL)
	Expect(err).NotTo(HaveOccurred())
	return "remote:" + topic + "@" + u.Host
}

// remoteOf returns parent's listed remote link id (nil when there is none).
func remoteOf(ctx context.Context, parent, id string) func(Gomega) *client.ChildLink {
	return func(g Gomega) *client.ChildLink {
		kids, err := broker.Children(ctx, parent)
		g.Expect(err).NotTo(HaveOccurred())
		for _, k := range kids.Children {
			if k.ID == id {
				return &k
			}
		}
		return nil
	}
}

// remoteLinks counts parent's remote links on the brokers.
func remoteLinks(ctx context.Context, parent string) int {
	GinkgoHelper()
	kids, err := broker.Children(ctx, parent)
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, k := range kids.Children {
		if k.Kind == "remote" {
			n++
		}
	}
	return n
}

// targetTopics creates topics on the target broker.
func targetTopics(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, n := range names {
		_, err := target.CreateTopic(ctx, client.CreateTopicRequest{Name: n})
		Expect(err).NotTo(HaveOccurred())
	}
}

// credentials creates a Secret with the default keys of a credentialsSecretRef.
func credentials(ctx context.Context, name, user, password string) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string][]byte{"username": []byte(user), "password": []byte(password)},
	})).To(Succeed())
}

// received consumes topic on the target broker and returns every body seen so far.
func received(ctx context.Context, topic string) func(Gomega) map[string]bool {
	got := map[string]bool{}
	return func(g Gomega) map[string]bool {
		msgs, err := target.Consume(ctx, topic, client.ConsumeOptions{Wait: time.Second, Max: 10})
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range msgs {
			b, err := m.Bytes()
			g.Expect(err).NotTo(HaveOccurred())
			got[string(b)] = true
			g.Expect(target.Ack(ctx, topic, m.ReceiptHandle)).To(Succeed())
		}
		return got
	}
}

func produce(ctx context.Context, topic string, bodies ...string) {
	GinkgoHelper()
	for _, b := range bodies {
		Expect(broker.Produce(ctx, topic, []byte(b), client.ProduceOptions{})).To(Succeed())
	}
}

var _ = Describe("Remote FanoutLinks", func() {
	It("attaches a remote child of another NaradCluster with its admin Secret, copies the parent's records, and detaches on delete", func(ctx SpecContext) {
		topics(ctx, "rm-p")
		targetTopics(ctx, "rm-t")
		id := remoteID("rm-t")
		Expect(k8s.Create(ctx, newRemoteLink("dr", "rm-p", naradv1.FanoutRemote{
			ClusterRef: &naradv1.RemoteClusterReference{Name: targetName}, Topic: "rm-t"}))).To(Succeed())

		Eventually(remoteOf(ctx, "rm-p", id)).ShouldNot(BeNil())
		epoch := remoteOf(ctx, "rm-p", id)(Default).AttachEpoch
		Eventually(get(ctx, "dr")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.Epoch", epoch),
			HaveField("Status.LinkID", id), HaveField("Status.TargetURL", targetURL),
			HaveField("Status.RemoteState", "active")))
		Expect(condition(ctx, "dr", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionTrue))
		Expect(condition(ctx, "dr", naradv1.ConditionDegraded)(Default)).To(HaveField("Status", metav1.ConditionFalse))
		Eventually(eventReasons(ctx, "dr")).Should(ContainElement("Attached"))

		produce(ctx, "rm-p", "a", "b", "c")
		Eventually(received(ctx, "rm-t")).Should(Equal(map[string]bool{"a": true, "b": true, "c": true}))
		parent, err := broker.GetTopic(ctx, "rm-p", nil)
		Expect(err).NotTo(HaveOccurred())
		// The recovery point of every partition passes the records the target confirmed: 3 in all.
		Eventually(func(g Gomega) int64 {
			fl := get(ctx, "dr")(g)
			g.Expect(fl.Status.RecoveryPoint).To(HaveLen(parent.Partitions))
			g.Expect(fl.Status.Lag).To(BeZero())
			var sum int64
			for _, off := range fl.Status.RecoveryPoint {
				sum += off
			}
			return sum
		}).Should(Equal(int64(3)))

		Expect(k8s.Delete(ctx, newLink("dr", "", "", nil))).To(Succeed())
		Eventually(gone(ctx, "dr")).Should(BeTrue())
		Expect(remoteOf(ctx, "rm-p", id)(Default)).To(BeNil())
		Eventually(eventReasons(ctx, "dr")).Should(ContainElement("Detached"))
	})

	It("fails wrong credentials with the brokers' reason unauthorized and leaves no link", func(ctx SpecContext) {
		topics(ctx, "bad-cred-p")
		targetTopics(ctx, "bad-cred-t")
		// Not "admin": the target throttles a user's failed logins, even its right password after.
		credentials(ctx, "bad-cred", "mallory", "not-the-password")
		Expect(k8s.Create(ctx, newRemoteLink("bad-cred", "bad-cred-p", naradv1.FanoutRemote{
			URL: targetURL, Topic: "bad-cred-t",
			CredentialsSecretRef: &naradv1.CredentialsSecretReference{Name: "bad-cred"}}))).To(Succeed())
		Eventually(get(ctx, "bad-cred")).Should(HaveField("Status.State", naradv1.FanoutLinkFailed))
		Expect(condition(ctx, "bad-cred", naradv1.ConditionDegraded)(Default)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "unauthorized")))
		Expect(condition(ctx, "bad-cred", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionFalse))
		Expect(get(ctx, "bad-cred")(Default).Status.LinkID).To(BeEmpty())
		Eventually(eventReasons(ctx, "bad-cred")).Should(ContainElement("AttachFailed"))
		Expect(remoteLinks(ctx, "bad-cred-p")).To(BeZero())

		Expect(k8s.Delete(ctx, newLink("bad-cred", "", "", nil))).To(Succeed())
		Eventually(gone(ctx, "bad-cred")).Should(BeTrue())
	})

	It("attaches by URL with a credentials Secret and shows a broken target as the link's state", func(ctx SpecContext) {
		topics(ctx, "rm-url-p")
		targetTopics(ctx, "rm-url-t")
		credentials(ctx, "writer", "admin", targetPassword)
		id := remoteID("rm-url-t")
		Expect(k8s.Create(ctx, newRemoteLink("by-url", "rm-url-p", naradv1.FanoutRemote{
			URL: targetURL, Topic: "rm-url-t", Start: naradv1.FanoutStartOldest,
			CredentialsSecretRef: &naradv1.CredentialsSecretReference{Name: "writer"}}))).To(Succeed())
		Eventually(get(ctx, "by-url")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.LinkID", id),
			HaveField("Status.RemoteState", "active")))
		Expect(remoteOf(ctx, "rm-url-p", id)(Default)).To(HaveField("Start", "oldest"))

		// The target topic goes away: the next record cannot be delivered, and the FanoutLink
		// says so with the brokers' state while staying attached.
		Expect(target.DeleteTopic(ctx, "rm-url-t")).To(Succeed())
		produce(ctx, "rm-url-p", "lost-target")
		Eventually(get(ctx, "by-url")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached),
			HaveField("Status.RemoteState", "target_topic_missing"),
			HaveField("Status.LastError", Not(BeEmpty())),
			HaveField("Status.Lag", BeNumerically(">", 0))))
		Expect(condition(ctx, "by-url", naradv1.ConditionDegraded)(Default)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "target_topic_missing")))
		Expect(condition(ctx, "by-url", naradv1.ConditionReady)(Default)).To(HaveField("Status", metav1.ConditionFalse))

		Expect(k8s.Delete(ctx, newLink("by-url", "", "", nil))).To(Succeed())
		Eventually(gone(ctx, "by-url")).Should(BeTrue())
		Expect(remoteOf(ctx, "rm-url-p", id)(Default)).To(BeNil())
	})

	It("adopts a remote link attached by hand to the same target, keeping its epoch", func(ctx SpecContext) {
		topics(ctx, "rm-adopt-p")
		targetTopics(ctx, "rm-adopt-t")
		id := remoteID("rm-adopt-t")
		_, err := broker.AttachRemote(ctx, "rm-adopt-p", client.RemoteChild{URL: targetURL, Topic: "rm-adopt-t",
			User: "admin", Password: targetPassword}, 0, "")
		Expect(err).NotTo(HaveOccurred())
		epoch := remoteOf(ctx, "rm-adopt-p", id)(Default).AttachEpoch
		Expect(k8s.Create(ctx, newRemoteLink("adopt-remote", "rm-adopt-p", naradv1.FanoutRemote{
			ClusterRef: &naradv1.RemoteClusterReference{Name: targetName}, Topic: "rm-adopt-t"}))).To(Succeed())
		Eventually(get(ctx, "adopt-remote")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.Epoch", epoch)))
		Eventually(eventReasons(ctx, "adopt-remote")).Should(ContainElement("Adopted"))
		Consistently(remoteOf(ctx, "rm-adopt-p", id), resync).Should(HaveField("AttachEpoch", epoch))
		Expect(remoteLinks(ctx, "rm-adopt-p")).To(Equal(1))
	})

	It("does not lend another namespace's admin Secret: a cross-namespace target needs credentials", func(ctx SpecContext) {
		topics(ctx, "rm-far-p")
		targetTopics(ctx, "rm-far-t")
		Expect(k8s.Create(ctx, newRemoteLink("far", "rm-far-p", naradv1.FanoutRemote{
			ClusterRef: &naradv1.RemoteClusterReference{Name: farName, Namespace: farNamespace}, Topic: "rm-far-t"}))).To(Succeed())
		Eventually(condition(ctx, "far", naradv1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "CredentialsRequired")))
		Expect(get(ctx, "far")(Default).Status.State).To(Equal(naradv1.FanoutLinkFailed))
		Expect(remoteLinks(ctx, "rm-far-p")).To(BeZero())

		credentials(ctx, "far-writer", "admin", targetPassword)
		Expect(k8s.Create(ctx, newRemoteLink("far-creds", "rm-far-p", naradv1.FanoutRemote{
			ClusterRef:           &naradv1.RemoteClusterReference{Name: farName, Namespace: farNamespace},
			Topic:                "rm-far-t",
			CredentialsSecretRef: &naradv1.CredentialsSecretReference{Name: "far-writer"}}))).To(Succeed())
		Eventually(get(ctx, "far-creds")).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.LinkID", remoteID("rm-far-t"))))
		produce(ctx, "rm-far-p", "x")
		Eventually(received(ctx, "rm-far-t")).Should(HaveKey("x"))
	})

	It("attaches a link waiting on its missing credentials Secret as soon as the Secret appears, not at its next retry", func(ctx SpecContext) {
		topics(ctx, "rm-late-p")
		targetTopics(ctx, "rm-late-t")
		Expect(k8s.Create(ctx, newRemoteLink("late-creds", "rm-late-p", naradv1.FanoutRemote{
			URL: targetURL, Topic: "rm-late-t",
			CredentialsSecretRef: &naradv1.CredentialsSecretReference{Name: "late-writer"}}))).To(Succeed())
		Eventually(condition(ctx, "late-creds", naradv1.ConditionReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "CredentialsNotFound")))
		Expect(get(ctx, "late-creds")(Default).Status.State).To(Equal(naradv1.FanoutLinkPending))
		// A waiting link is retried after as long as it has waited (1, 2, 4, 8, 16, 32 s after
		// Ready turned False). Past the 16 s retry the next one is 32 s after: an attach within
		// 8 s of the Secret's creation can only come from the Secret's own event.
		since := condition(ctx, "late-creds", naradv1.ConditionReady)(Default).LastTransitionTime.Time
		<-time.After(time.Until(since.Add(17 * time.Second))) // lets the backoff grow past 16 s
		Expect(get(ctx, "late-creds")(Default).Status.State).To(Equal(naradv1.FanoutLinkPending), "still waiting for its Secret")
		credentials(ctx, "late-writer", "admin", targetPassword)
		Eventually(get(ctx, "late-creds")).WithTimeout(8 * time.Second).Should(And(
			HaveField("Status.State", naradv1.FanoutLinkAttached), HaveField("Status.LinkID", remoteID("rm-late-t"))))
		produce(ctx, "rm-late-p", "late")
		Eventually(received(ctx, "rm-late-t")).Should(HaveKey("late"))
	})

	It("refuses a link with both child and remote through the API server (CEL)", func(ctx SpecContext) {
		fl := newRemoteLink("both", "p", naradv1.FanoutRemote{URL: targetURL, Topic: "t"})
		fl.Spec.Child = "c"
		err := k8s.Create(ctx, fl)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("exactly one of child and remote"))
	})
})
