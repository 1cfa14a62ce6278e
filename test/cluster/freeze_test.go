package cluster_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/test/harness"
)

var _ = Describe("A frozen partition owner", func() {
	It("(d) keeps produce answering 202 and reroutes to live partitions within seconds while an owner is SIGSTOPped, and delivers everything after SIGCONT", func() {
		c := newCluster(3)
		topic := "frozen-owner"
		owners := createTopic(c, 0, topic)
		frozen, _ := ownerNotLeader(c, owners, leader(c))
		others := c.Others(frozen)

		h := harness.NewHistory()
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "d", Workers: 3, Endpoints: c.Endpoints(others...), Interval: 20 * time.Millisecond,
		})
		cst, cwait := harness.StartClusterConsumers(tctx, h, harness.ConsumerOptions{
			Topic: topic, Workers: 2, Endpoints: c.Endpoints(others...),
		})
		watch(h, topic, pst, cst)
		waitAccepted(h, topic, 100, 20*time.Second)

		errsBefore := pst.Errors()
		pausedAt := time.Now()
		c.Pause(frozen)
		// Records accepted in the first 2.5 s of the freeze include some bound for the frozen
		// owner's partition: after the 3 s grace (or the 5 s dead verdict) they go to a live
		// sibling. All of them must be consumable while the owner is still frozen.
		window := [2]time.Time{pausedAt.Add(500 * time.Millisecond), pausedAt.Add(2500 * time.Millisecond)}
		<-time.After(time.Until(window[1])) // scenario timing: let the window fill, not a correctness wait
		ids := h.AcceptedBetween(topic, window[0], window[1])
		Expect(ids).NotTo(BeEmpty(), "produce went on during the freeze")
		var undelivered []string
		Eventually(func() int {
			_, undelivered = h.Latencies(ids)
			return len(undelivered)
		}).WithTimeout(time.Until(pausedAt.Add(14*time.Second))).WithPolling(100*time.Millisecond).Should(BeZero(), func() string {
			return fmt.Sprintf("records accepted 0.5-2.5 s into the freeze are delivered from live partitions while it lasts: %d of %d undelivered (first %v); producers %s; consumers %s",
				len(undelivered), len(ids), undelivered[:min(5, len(undelivered))], pst, cst)
		})
		lat, _ := h.Latencies(ids)
		ds := durations(lat)
		summary := fmt.Sprintf("%d records accepted 0.5-2.5 s into the freeze: delivery latency p50 %s, p90 %s, max %s",
			len(ids), harness.Quantile(ds, 0.5).Round(time.Millisecond), harness.Quantile(ds, 0.9).Round(time.Millisecond), harness.Quantile(ds, 1).Round(time.Millisecond))
		logf("%s", summary)
		AddReportEntry("reroute latency", summary)
		Expect(harness.Quantile(ds, 1)).To(BeNumerically("<", 10*time.Second), "rerouted within a few seconds")
		Expect(pst.Errors()-errsBefore).To(BeZero(), "produce on live nodes keeps answering 202 during the freeze: %s", pst)

		c.Resume(frozen)
		logf("frozen for %s", time.Since(pausedAt).Round(time.Millisecond))
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 20*time.Second)
		stop()
		pwait()
		cwait()
		logf("producers: %s", pst)
		logf("consumers: %s", cst)
		drain(h, topic, c.Endpoints())
		expectClean("frozen owner", h)
	})
})
