package crash_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// consumeAndAck reserves exactly n messages (max_messages batches) and acks every one of
// them, failing the spec on any ack outcome other than 204. Acking everything that was
// reserved keeps each partition's settled set a prefix, so the frontier covers all of it.
func consumeAndAck(c *client.Client, topic string, n int) []harness.Delivery {
	GinkgoHelper()
	var got []harness.Delivery
	for tries := 0; len(got) < n && tries < 200; tries++ {
		msgs, err := c.Consume(ctx(10*time.Second), topic, client.ConsumeOptions{Max: min(100, n-len(got)), Wait: time.Second})
		Expect(err).NotTo(HaveOccurred())
		ds, err := harness.ToDeliveries(msgs)
		Expect(err).NotTo(HaveOccurred())
		Expect(harness.AckAll(ctx(10*time.Second), c, topic, ds, time.Now().Add(5*time.Second))).To(Succeed())
		got = append(got, ds...)
	}
	Expect(got).To(HaveLen(n))
	return got
}

var _ = Describe("Consumer frontier durability across a crash", func() {
	It("never redelivers acks older than the durability interval after a kill -9, and redelivers every unacked message", func() {
		const total, acked = 2000, 1000
		n := newNode()
		c := start(n)
		topic := "acked-stay-acked"
		createTopic(c, topic)
		payloads, err := harness.ProduceBatches(ctx(30*time.Second), c, topic, "c", total, 100)
		Expect(err).NotTo(HaveOccurred())
		waitVisible(c, topic, total)

		done := consumeAndAck(c, topic, acked)
		ackedPos := map[harness.Pos]bool{}
		ackedPayload := map[string]bool{}
		for _, d := range done {
			ackedPos[d.Pos()] = true
			ackedPayload[d.Payload] = true
		}
		// Leases taken but never settled: they come back, and their handles die with the
		// process (nonces are seeded from the clock).
		held, err := c.Consume(ctx(10*time.Second), topic, client.ConsumeOptions{Max: 5, Wait: time.Second})
		Expect(err).NotTo(HaveOccurred())
		Expect(held).NotTo(BeEmpty())

		// The guarantee under test is time-based: the offset committer appends the frontier
		// every 100 ms and fdatasyncs the journal every 1 s, so after 1.5 s without traffic
		// every ack is durable even against power loss, let alone kill -9.
		time.Sleep(1500 * time.Millisecond)
		n.Kill()

		c = restart(n)
		for _, m := range held {
			Expect(client.IsStatus(c.Ack(ctx(5*time.Second), topic, m.ReceiptHandle), http.StatusGone)).To(BeTrue(),
				"a handle issued before the restart never validates after it")
		}
		unacked := map[string]bool{}
		for _, p := range payloads {
			if !ackedPayload[p] {
				unacked[p] = true
			}
		}
		Expect(unacked).To(HaveLen(total - acked))
		ds := drainAll(c, topic, unacked)

		var back []string
		for _, d := range ds {
			if ackedPos[d.Pos()] || ackedPayload[d.Payload] {
				back = append(back, fmt.Sprintf("p%d@%d %s", d.Partition, d.Offset, d.Payload))
			}
		}
		report := fmt.Sprintf("%d acked 1.5 s before the kill, %d redelivered; %d unacked, %d deliveries after restart",
			acked, len(back), len(unacked), len(ds))
		AddReportEntry("acks before kill -9", report)
		GinkgoWriter.Println(report)
		Expect(back).To(BeEmpty(), "acked messages came back after the restart")
		expectNoLoss("unacked after kill -9", unacked, ds)
	})

	DescribeTable("redelivers after a crash only acks made within ~1.2 s of it, and every unacked message",
		func(fault string) {
			ackStreamThenCrash(fault)
		},
		Entry("kill -9 at a random moment", ""),
		Entry("crash in the offset committer before a journal append", "consume.before_journal_append=crash@6"),
		Entry("crash in the offset committer before a journal fdatasync", "consume.before_journal_sync=crash@2"),
	)
})

// ackStreamThenCrash produces 20,000 messages, then lets two consumers consume and ack
// continuously until the node dies: by SIGKILL at a random moment (fault == "") or at the
// armed fault point. After a restart it drains the topic and asserts that a redelivered
// acked message was acked less than 1.2 s before the crash (100 ms committer tick + 1 s
// journal fdatasync + slack; against kill -9 the page cache keeps even unsynced journal
// appends, so the observed bound is about one tick) and that nothing unacked is lost.
func ackStreamThenCrash(fault string) {
	GinkgoHelper()
	const total = 20000
	n := newNode()
	var env []string
	if fault != "" {
		env = append(env, "NARAD_FAULTS="+fault)
	}
	c := start(n, env...)
	topic := "acks-in-flight"
	createTopic(c, topic)
	payloads, err := harness.ProduceBatches(ctx(60*time.Second), c, topic, "d", total, 1000)
	Expect(err).NotTo(HaveOccurred())
	waitVisible(c, topic, total)

	// Two consumers ack continuously, each paced to one 20-message round per 10 ms (~4,000
	// acks/s together) so the stream outlasts the crash moment. Each ack's completion time is
	// recorded client-side: the server applied the ack before answering, so an age computed
	// from the completion time never overstates the real one.
	var mu sync.Mutex
	ackedAt := map[harness.Pos]time.Time{}
	ackedPayload := map[string]bool{}
	cctx, stopConsumers := context.WithCancel(context.Background())
	defer stopConsumers()
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			pace := time.NewTicker(10 * time.Millisecond)
			defer pace.Stop()
			for cctx.Err() == nil {
				select {
				case <-pace.C:
				case <-cctx.Done():
					return
				}
				msgs, err := c.Consume(cctx, topic, client.ConsumeOptions{Max: 20, Wait: 200 * time.Millisecond})
				if err != nil {
					return // the node is gone
				}
				ds, err := harness.ToDeliveries(msgs)
				if err != nil || len(ds) == 0 {
					continue
				}
				entries := make([]client.AckEntry, len(ds))
				for i, d := range ds {
					entries[i] = client.AckEntry{ReceiptHandle: d.Handle}
				}
				res, err := c.AckBatch(cctx, topic, entries)
				if err != nil {
					return // outcome unknown: not counted as acked
				}
				now := time.Now()
				mu.Lock()
				for i, r := range res {
					if r.OK() {
						ackedAt[ds[i].Pos()] = now
						ackedPayload[ds[i].Payload] = true
					}
				}
				mu.Unlock()
			}
		}()
	}

	var crashAt time.Time
	began := time.Now()
	if fault == "" {
		rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 7))
		delay := 1500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
		Eventually(func() bool {
			mu.Lock()
			defer mu.Unlock()
			return time.Since(began) >= delay && len(ackedAt) > 0
		}).WithTimeout(15 * time.Second).WithPolling(time.Millisecond).Should(BeTrue())
		crashAt = time.Now()
		n.Kill()
	} else {
		Expect(n.Wait(30*time.Second)).To(Succeed(), "the fault %s never fired", fault)
		crashAt = time.Now() // observed exit: at or after the real crash, so ages only grow
		Expect(n.ExitSignal()).To(Equal(syscall.SIGKILL), "the process died by the injected SIGKILL")
	}
	stopConsumers()
	wg.Wait()
	mu.Lock()
	ackedCount := len(ackedAt)
	mu.Unlock()
	Expect(ackedCount).To(BeNumerically(">", 0))
	Expect(ackedCount).To(BeNumerically("<", total), "the crash must land while acks are still flowing")

	c = restart(n)
	unacked := map[string]bool{}
	for _, p := range payloads {
		if !ackedPayload[p] {
			unacked[p] = true
		}
	}
	ds := drainAll(c, topic, unacked)

	const bound = 1200 * time.Millisecond
	var ages []time.Duration
	var tooOld []string
	for _, d := range ds {
		at, ok := ackedAt[d.Pos()]
		if !ok {
			continue
		}
		age := crashAt.Sub(at)
		ages = append(ages, age)
		if age >= bound {
			tooOld = append(tooOld, fmt.Sprintf("p%d@%d acked %s before the crash", d.Partition, d.Offset, age))
		}
	}
	sort.Slice(ages, func(i, j int) bool { return ages[i] < ages[j] })
	maxAge := time.Duration(0)
	if len(ages) > 0 {
		maxAge = ages[len(ages)-1]
	}
	how := fault
	if how == "" {
		how = "kill -9"
	}
	report := fmt.Sprintf("%s %s after consumers started: %d acked before the crash, %d of them redelivered, oldest redelivered ack %s before the crash (bound %s)",
		how, crashAt.Sub(began).Round(time.Millisecond), ackedCount, len(ages), maxAge.Round(time.Millisecond), bound)
	AddReportEntry("acks in flight at the crash", report)
	GinkgoWriter.Println(report)
	if len(tooOld) > 10 {
		tooOld = tooOld[:10]
	}
	Expect(tooOld).To(BeEmpty(), report)
	expectNoLoss("unacked after "+how, unacked, ds)
}
