package crash_test

import (
	"context"
	"fmt"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Produce durability across a crash", func() {
	It("delivers every 202-acknowledged message after a kill -9 in the middle of a 16-producer stream", func() {
		n := newNode()
		c := start(n)
		topic := "kill-mid-produce"
		createTopic(c, topic)

		pctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
		defer stop()
		began := time.Now()
		prod, wait := harness.StartProducers(pctx, c, topic, "a", 16, 0)
		// Kill about half-way through the ~2 s stream, once a good number of 202s are in.
		Eventually(func() bool {
			_, acc, _ := prod.Counts()
			return acc >= 200 && time.Since(began) >= time.Second
		}).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())
		n.Kill()
		killedAt := time.Since(began)
		wait()
		attempts, accepted, failures := prod.Counts()
		GinkgoWriter.Printf("killed after %s: %d produce calls, %d answered 202, %d failed\n", killedAt, attempts, accepted, failures)
		Expect(failures).To(BeNumerically(">", 0), "the kill must land while producers are still sending")

		c = restart(n)
		expectNoLoss("kill -9 mid-produce", prod.Accepted(), drainAll(c, topic, prod.Accepted()))
	})

	It("delivers every 202-acknowledged message after a second kill -9 during recovery", func() {
		n := newNode()
		c := start(n)
		topic := "double-kill"
		createTopic(c, topic)

		pctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
		defer stop()
		began := time.Now()
		prod, wait := harness.StartProducers(pctx, c, topic, "dk", 16, 0)
		Eventually(func() bool {
			_, acc, _ := prod.Counts()
			return acc >= 200 && time.Since(began) >= time.Second
		}).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())
		n.Kill()
		wait()

		// Restart and kill again while the recovered ingress WAL is being re-dispatched.
		restart(n)
		n.Kill()
		c = restart(n)
		expectNoLoss("kill -9 twice", prod.Accepted(), drainAll(c, topic, prod.Accepted()))
	})

	It("delivers every 202-acknowledged message after a graceful stop in the middle of a 16-producer stream", func() {
		n := newNode()
		c := start(n)
		topic := "term-mid-produce"
		createTopic(c, topic)

		pctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		began := time.Now()
		prod, wait := harness.StartProducers(pctx, c, topic, "t", 16, 0)
		Eventually(func() bool {
			_, acc, _ := prod.Counts()
			return acc >= 200 && time.Since(began) >= time.Second
		}).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())
		Expect(n.Stop()).To(Succeed(), "SIGTERM under load still exits with status 0")
		wait()
		_, _, failures := prod.Counts()
		Expect(failures).To(BeNumerically(">", 0), "the stop must land while producers are still sending")

		c = restart(n)
		expectNoLoss("SIGTERM mid-produce", prod.Accepted(), drainAll(c, topic, prod.Accepted()))
	})

	It("keeps every record a consumer has seen, at the same offset with the same bytes, after a kill -9", func() {
		n := newNode()
		c := start(n)
		topic := "visible-stays-visible"
		createTopic(c, topic)

		pctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
		defer stop()
		_, wait := harness.StartProducers(pctx, c, topic, "v", 8, 0)

		// Tail every partition with replay reads while the producers run.
		seen := map[harness.Pos]string{}
		next := []int64{0, 0, 0}
		began := time.Now()
		for len(seen) < 500 || time.Since(began) < 700*time.Millisecond {
			Expect(time.Since(began)).To(BeNumerically("<", 10*time.Second), "tailing made no progress")
			for p := range next {
				msgs, err := c.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{Partition: &p, Offset: &next[p], Max: 200})
				Expect(err).NotTo(HaveOccurred())
				ds, err := harness.ToDeliveries(msgs)
				Expect(err).NotTo(HaveOccurred())
				for _, d := range ds {
					Expect(d.Offset).To(Equal(next[p]), "replay returns consecutive offsets")
					seen[d.Pos()] = d.Payload
					next[p]++
				}
			}
		}
		n.Kill()
		wait()

		c = restart(n)
		hw, err := harness.HighWatermarks(ctx(5*time.Second), c, topic)
		Expect(err).NotTo(HaveOccurred())
		for p := range next {
			Expect(hw[p]).To(BeNumerically(">=", next[p]), "partition %d: a visible record never falls above the recovered high watermark", p)
			for off := int64(0); off < next[p]; {
				o := off
				msgs, err := c.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{Partition: &p, Offset: &o, Max: 500})
				Expect(err).NotTo(HaveOccurred())
				ds, err := harness.ToDeliveries(msgs)
				Expect(err).NotTo(HaveOccurred())
				Expect(ds).NotTo(BeEmpty())
				for _, d := range ds {
					if d.Offset >= next[p] {
						break
					}
					Expect(d.Payload).To(Equal(seen[d.Pos()]), "p%d@%d changed across the crash", p, d.Offset)
				}
				off += int64(len(ds))
			}
		}
		AddReportEntry("visible stays visible", fmt.Sprintf("%d records seen before the kill, all at the same offsets after it", len(seen)))
	})

	DescribeTable("delivers every 202-acknowledged message after a crash at a commit-path fault point",
		func(fault string) {
			n := newNode()
			c := start(n, "NARAD_FAULTS="+fault)
			topic := "fault-crash"
			createTopic(c, topic)

			// Produce until the armed point kills the process (bounded: 15 s).
			pctx, stop := context.WithTimeout(context.Background(), 15*time.Second)
			defer stop()
			prod, wait := harness.StartProducers(pctx, c, topic, "b", 16, 0)
			Expect(n.Wait(20*time.Second)).To(Succeed(), "the fault %s never fired", fault)
			Expect(n.ExitSignal()).To(Equal(syscall.SIGKILL), "the process died by the injected SIGKILL")
			wait()
			attempts, accepted, failures := prod.Counts()
			GinkgoWriter.Printf("%s: %d produce calls, %d answered 202, %d failed\n", fault, attempts, accepted, failures)
			Expect(accepted).To(BeNumerically(">", 0))

			c = restart(n)
			expectNoLoss(fault, prod.Accepted(), drainAll(c, topic, prod.Accepted()))
		},
		Entry("after a segment fsync, before the hwm persist (hidden tail)", "log.before_hwm_persist=crash@40"),
		Entry("between the segment fsync and the read-back verify", "log.after_fsync=crash@40"),
		Entry("before the segment fsync", "log.before_fsync=crash@40"),
		Entry("after the ingress WAL fsync, before the 202 is sent", "wal.after_fsync=crash@40"),
		Entry("after the WAL write, before its fsync", "wal.before_fsync=crash@40"),
	)
})
