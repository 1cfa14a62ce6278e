package cluster_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// A consume answer holds at most 8 MiB of keys and payloads, whichever node it is asked of
// (docs/internals/consume-and-leases.md §4): a node that owns none of the records probes their
// owner with what its answer holds, and the owner adds only what fits. Without the bound, a
// probe for many large records outgrew the node RPC message (16 MiB) and failed after its
// leases were taken, so the records stayed invisible until they expired, and again on the
// next probe.
const answerBound = 8 << 20

var _ = Describe("Consume answers of large records", func() {
	It("(h2) a queue consume through a node that owns none of them answers at most 8 MiB of 256 KiB records per call, and 100 of them drain in a few calls", func() {
		c := newCluster(3)
		topic := "large-records"
		owners := createTopic(c, 0, topic)
		a, b, p := 0, -1, -1
		for q, o := range owners {
			if i := c.Index(o); i != a {
				b, p = i, q
				break
			}
		}
		Expect(b).To(BeNumerically(">=", 0), "a partition another node owns")
		h := harness.NewHistory()
		const n, size = 100, 256 << 10
		Expect(fillPartition(h, c.Endpoint(b), topic, "h2-large", p, n, size)).To(Equal(n))

		calls := 0
		for len(h.Missing(topic)) > 0 && calls < 30 {
			calls++
			msgs, err := c.Client(a).Consume(ctx(20*time.Second), topic, client.ConsumeOptions{Max: 1000, Wait: time.Second})
			Expect(err).NotTo(HaveOccurred())
			ds, err := harness.ToDeliveries(msgs)
			Expect(err).NotTo(HaveOccurred())
			bytes := 0
			for _, d := range ds {
				bytes += len(d.Key) + len(d.Payload)
			}
			logf("call %d through %s: %d messages, %d bytes", calls, c.ID(a), len(ds), bytes)
			Expect(bytes).To(BeNumerically("<=", answerBound), "one answer's keys and payloads")
			h.Deliver(topic, c.ID(a), ds, false)
			Expect(harness.AckAll(ctx(10*time.Second), c.Client(a), topic, ds, time.Now().Add(5*time.Second))).To(Succeed())
		}
		Expect(h.Missing(topic)).To(BeEmpty(), "every record delivered within %d calls", calls)
		// 25 MiB at 8 MiB an answer: 4 calls; a failed probe would leave its records leased for
		// the topic's 5 s visibility timeout, which the budget of calls would not outlast twice.
		Expect(calls).To(BeNumerically("<=", 8))
		expectClean("large records through a non-owner", h)
	})
})
