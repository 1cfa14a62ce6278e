package crash_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Graceful restart (SIGTERM)", func() {
	It("keeps every high watermark and message, and forgets no ack, including out-of-order acks", func() {
		const total = 600
		n := newNode()
		c := start(n)
		topic := "graceful"
		createTopic(c, topic)
		payloads, err := harness.ProduceBatches(ctx(30*time.Second), c, topic, "e", total, 100)
		Expect(err).NotTo(HaveOccurred())
		waitVisible(c, topic, total)
		before, err := harness.HighWatermarks(ctx(5*time.Second), c, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(harness.Sum(before)).To(Equal(int64(total)))

		acked := map[string]bool{}
		for _, d := range consumeAndAck(c, topic, 150) {
			acked[d.Payload] = true
		}
		// Out-of-order acks on partition 0: reserve 5, ack the last 4 and nack the first,
		// leaving them parked above the frontier hole (the acked-ahead set).
		p0 := 0
		var held []client.Message
		for len(held) < 5 {
			msgs, err := c.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{Partition: &p0, Max: 5 - len(held), Wait: time.Second})
			Expect(err).NotTo(HaveOccurred())
			Expect(msgs).NotTo(BeEmpty())
			held = append(held, msgs...)
		}
		for _, m := range held[1:] {
			Expect(c.Ack(ctx(5*time.Second), topic, m.ReceiptHandle)).To(Succeed())
			b, err := m.Bytes()
			Expect(err).NotTo(HaveOccurred())
			acked[string(b)] = true
		}
		Expect(c.Nack(ctx(5*time.Second), topic, held[0].ReceiptHandle)).To(Succeed())

		Expect(n.Stop()).To(Succeed(), "SIGTERM ends the process with exit status 0")
		c = restart(n)

		after, err := harness.HighWatermarks(ctx(5*time.Second), c, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "a clean restart keeps each partition's high watermark exactly")

		want := map[string]bool{}
		for _, p := range payloads {
			if !acked[p] {
				want[p] = true
			}
		}
		ds := drainAll(c, topic, want)
		counts := harness.PayloadCounts(ds)
		var back []string
		for p := range counts {
			if acked[p] {
				back = append(back, p)
			}
		}
		Expect(back).To(BeEmpty(), "acks (in-order and acked-ahead) survive a graceful restart")
		Expect(harness.Duplicates(counts)).To(BeZero(), "a clean restart duplicates nothing")
		expectNoLoss("graceful restart", want, ds)

		final, err := harness.HighWatermarks(ctx(5*time.Second), c, topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(final).To(Equal(before), "nothing was re-committed from the ingress WAL after a clean shutdown")
	})
})
