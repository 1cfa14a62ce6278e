package disk_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/test/harness"
)

// Sizes of the full-disk scenario: 8 KiB bodies fill a 24 MiB tmpfs after about 2,400
// messages (WAL plus partition logs); 128 MiB leaves room for the rest of the spec.
const (
	fullMiB     = 24
	grownMiB    = 128
	fillBody    = 8 << 10
	fillWorkers = 4
	fillBudget  = 6000 // produce calls at most: a disk that never fills fails the spec
	enough503s  = 5    // 503s to see before the disk counts as full
)

// fillUntilUnavailable produces 8 KiB payloads "<prefix>-<seq>" with 4 workers until the node
// has answered enough503s produces with 503 (or the budget is spent, which fails the spec) and
// returns what every call was answered.
func fillUntilUnavailable(n *harness.Node, topic, prefix string) *Outcome {
	GinkgoHelper()
	p := NewProducer(n.URL(), topic, prefix, fillBody)
	defer p.Close()
	out := NewOutcome()
	began := time.Now()
	load := StartLoad(p, out, fillWorkers, fillBudget)
	defer load.Stop()
	Eventually(func() int {
		s := out.Snapshot()
		if s.Unavailable < enough503s && load.Finished() {
			StopTrying(fmt.Sprintf("the disk never filled: %s", s)).Now()
		}
		return s.Unavailable
	}).WithTimeout(60*time.Second).WithPolling(10*time.Millisecond).Should(BeNumerically(">=", enough503s),
		"a full disk must turn produce into 503s\n%s", n.Tail(20))
	load.Stop()
	s := out.Snapshot()
	report := fmt.Sprintf("filled in %s: %s", time.Since(began).Round(time.Millisecond), s)
	GinkgoWriter.Println(report)
	AddReportEntry("fill", report)
	return out
}

var _ = Describe("A full disk", func() {
	It("answers produce with 503 and a JSON error, stays alive, loses no 202, and takes produce again once space returns", func() {
		fs := mountTmpfs(fullMiB)
		n := newNodeOn(fs.Dir)
		c := startReady(n)
		topic := "disk-full"
		createTopic(c, topic)

		out := fillUntilUnavailable(n, topic, "fill")
		expectOnly503s(out)
		Expect(out.Snapshot().Accepted).To(BeNumerically(">", 0), "the disk had room for some messages")
		expectAliveAndHealthy(n, c)

		Expect(fs.Resize(grownMiB)).To(Succeed())
		eventuallyAccepted(n, topic, "grown", out, 15*time.Second)
		accepted := out.Accepted()
		drainAndExpectDelivered("disk full, then grown", c, topic, accepted)
	})

	It("loses no 202 when the node is killed with SIGKILL while its disk is full", func() {
		fs := mountTmpfs(fullMiB)
		n := newNodeOn(fs.Dir)
		c := startReady(n)
		topic := "disk-full-kill"
		createTopic(c, topic)

		out := fillUntilUnavailable(n, topic, "fill")
		expectOnly503s(out)
		Expect(n.Running()).To(BeTrue(), "the node must survive the full disk until it is killed")
		n.Kill()

		Expect(fs.Resize(grownMiB)).To(Succeed())
		c = startReady(n)
		accepted := out.Accepted()
		drainAndExpectDelivered("kill -9 on a full disk, grown, restarted", c, topic, accepted)
		eventuallyAccepted(n, topic, "restarted", out, 15*time.Second)
	})
})
