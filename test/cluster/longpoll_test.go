package cluster_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// wakeLatency parks a consume with wait=5s on node a, produces one message pinned to
// partition p through node b once the poll had time to park, and returns the time from the
// produce call's start to the consume's answer. pinned selects pinned-queue mode.
func wakeLatency(c *harness.Cluster, h *harness.History, topic string, a, b, p int, id string, pinned bool) time.Duration {
	GinkgoHelper()
	type answer struct {
		msgs []client.Message
		err  error
		at   time.Time
	}
	got := make(chan answer, 1)
	opts := client.ConsumeOptions{Wait: 5 * time.Second}
	if pinned {
		opts.Partition = &p
	}
	cctx := ctx(15 * time.Second)
	go func() {
		msgs, err := c.Client(a).Consume(cctx, topic, opts)
		got <- answer{msgs, err, time.Now()}
	}()
	// Scenario timing: give the request time to reach the server and park (if it has not, the
	// message is simply found at once and the latency only gets smaller).
	<-time.After(500 * time.Millisecond)
	sent := time.Now()
	Expect(produceN(h, c.Endpoint(b), topic, id, 1, &p)).To(Equal(1))
	var r answer
	Eventually(got).WithTimeout(10 * time.Second).Should(Receive(&r))
	Expect(r.err).NotTo(HaveOccurred())
	Expect(r.msgs).To(HaveLen(1), "the parked consume returns the message rather than timing out")
	ds, err := harness.ToDeliveries(r.msgs)
	Expect(err).NotTo(HaveOccurred())
	h.Deliver(topic, c.ID(a), ds, false)
	Expect(ds[0].Payload).To(Equal(id + "-000000"))
	Expect(harness.AckAll(ctx(10*time.Second), c.Client(a), topic, ds, time.Now().Add(5*time.Second))).To(Succeed())
	return r.at.Sub(sent)
}

var _ = Describe("Cross-node long-poll", func() {
	It("(h) wakes a consumer long-polling on one node for a message produced on the owning node well under a second later", func() {
		c := newCluster(3)
		topic := "long-poll-wake"
		owners := createTopic(c, 0, topic)
		a := 0
		var b, p int
		for q, o := range owners {
			if i := c.Index(o); i != a {
				b, p = i, q
				break
			}
		}
		// Only partition p (owned by b) ever receives a message; a's own partitions stay empty.
		h := harness.NewHistory()
		const rounds = 4
		var queue, pinned []time.Duration
		for r := range rounds {
			queue = append(queue, wakeLatency(c, h, topic, a, b, p, fmt.Sprintf("hq%d", r), false))
			pinned = append(pinned, wakeLatency(c, h, topic, a, b, p, fmt.Sprintf("hp%d", r), true))
		}
		summary := fmt.Sprintf("consumer on %s, message produced on owner %s (p%d): queue-mode wake %v (max %s); pinned wake %v (max %s)",
			c.ID(a), c.ID(b), p, queue, harness.Quantile(queue, 1).Round(time.Millisecond), pinned, harness.Quantile(pinned, 1).Round(time.Millisecond))
		logf("%s", summary)
		AddReportEntry("cross-node wake latency", summary)
		// Loose bound for noisy machines; the point is a wake-up, not the 5 s poll running out.
		Expect(harness.Quantile(queue, 1)).To(BeNumerically("<", 2*time.Second))
		Expect(harness.Quantile(pinned, 1)).To(BeNumerically("<", 2*time.Second))
		drain(h, topic, c.Endpoints())
		expectClean("long-poll wake", h)
	})
})
