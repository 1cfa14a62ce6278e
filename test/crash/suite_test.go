// Package crash_test proves the durability guarantees of docs/internals/http-api.md §4.1 and
// docs/internals/consume-and-leases.md §9–§10 with real processes: SIGKILL (kill -9) at arbitrary moments,
// crashes at named fault points (NARAD_FAULTS), and graceful SIGTERM restarts, each followed by
// a restart on the same data directory and a full drain.
package crash_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestCrash(t *testing.T) {
	suite.Run(t, "narad crash and restart durability")
}

// newNode prepares a dev-mode node with its own data directory, removed (and the process
// killed) when the spec ends. It is not started.
func newNode() *harness.Node {
	GinkgoHelper()
	n, err := harness.NewNode(harness.Options{ID: "n1", Dev: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("node log tail:\n%s\n", n.Tail(30))
		}
		n.Cleanup()
	})
	return n
}

// start starts n (with extra environment such as NARAD_FAULTS) and waits until it is ready.
func start(n *harness.Node, env ...string) *client.Client {
	GinkgoHelper()
	Expect(n.StartReady(env...)).To(Succeed())
	return n.Client()
}

// restart starts n again on the same data directory, without any fault armed.
func restart(n *harness.Node) *client.Client {
	GinkgoHelper()
	Expect(n.Running()).To(BeFalse(), "restart expects a stopped process")
	return start(n)
}

// ctx returns a context bounded to d, cancelled when the spec ends.
func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

// createTopic creates a default 3-partition topic.
func createTopic(c *client.Client, name string) {
	GinkgoHelper()
	_, err := c.CreateTopic(ctx(10*time.Second), client.CreateTopicRequest{Name: name})
	Expect(err).NotTo(HaveOccurred())
}

// waitVisible waits until the topic's high watermarks add up to at least n.
func waitVisible(c *client.Client, topic string, n int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) int64 {
		hw, err := harness.HighWatermarks(ctx(5*time.Second), c, topic)
		g.Expect(err).NotTo(HaveOccurred())
		return harness.Sum(hw)
	}).WithTimeout(20 * time.Second).WithPolling(20 * time.Millisecond).Should(BeNumerically(">=", n))
}

// drainAll drains topic after a restart until every payload in want was delivered (or 30 s
// pass), then until 1 s passes without a message.
func drainAll(c *client.Client, topic string, want map[string]bool) []harness.Delivery {
	GinkgoHelper()
	ds, err := harness.Drain(ctx(60*time.Second), c, topic, harness.DrainOptions{
		Quiet: time.Second, Limit: 30 * time.Second,
		Done: func(got []harness.Delivery) bool {
			return len(harness.Missing(want, harness.PayloadCounts(got))) == 0
		},
	})
	if err != nil {
		GinkgoWriter.Printf("drain ended with: %v\n", err)
	}
	return ds
}

// expectNoLoss asserts every payload in want (202-answered, not yet acked) appears in got
// and reports the counts.
func expectNoLoss(label string, want map[string]bool, got []harness.Delivery) {
	GinkgoHelper()
	counts := harness.PayloadCounts(got)
	missing := harness.Missing(want, counts)
	extra := 0
	for p := range counts {
		if !want[p] {
			extra++
		}
	}
	report := fmt.Sprintf("%s: %d payloads must be delivered, %d deliveries after restart, %d distinct payloads, %d duplicate deliveries, %d payloads outside the expected set (in flight at the crash), %d missing",
		label, len(want), len(got), len(counts), harness.Duplicates(counts), extra, len(missing))
	GinkgoWriter.Println(report)
	AddReportEntry(label, report)
	if len(missing) > 10 {
		missing = missing[:10]
	}
	Expect(missing).To(BeEmpty(), "every 202 must survive the crash (%s)", report)
}
