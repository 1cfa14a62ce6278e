package disk_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("An unwritable data directory", func() {
	// The kernel will not remount a filesystem read-only while files on it are open for writing
	// (EBUSY), and a running node always holds its WAL and logs open; what makes a data dir
	// unwritable under a running node in production is the kernel's own error handling
	// (errors=remount-ro), which this spec triggers on an ext4 image. Recent kernels keep such a
	// filesystem read-only until it is unmounted, so "writable again" means: stop the node,
	// remount, start it on the same data.
	It("answers produce with 503 and a JSON error while its filesystem is read-only, stays alive, and loses no 202 once writable again", func() {
		disk := mountExt4(256)
		n := newNodeOn(disk.Dir)
		c := startReady(n)
		topic := "read-only"
		createTopic(c, topic)

		p := NewProducer(n.URL(), topic, "ro", 1024)
		DeferCleanup(p.Close)
		out := NewOutcome()
		load := StartLoad(p, out, 4, 50000)
		DeferCleanup(load.Stop)
		Eventually(func() int { return out.Snapshot().Accepted }).
			WithTimeout(20*time.Second).WithPolling(10*time.Millisecond).Should(BeNumerically(">=", 300),
			"produce works before the filesystem fails")

		before := out.Snapshot()
		Expect(disk.TriggerError()).To(Succeed())
		Expect(disk.ReadOnly()).To(BeTrue(), "the kernel made the data dir read-only")
		Eventually(func() int { return out.Snapshot().Unavailable }).
			WithTimeout(5*time.Second).WithPolling(10*time.Millisecond).Should(BeNumerically(">=", 1),
			"produce must answer 503 within seconds of the data dir turning read-only\n%s", n.Tail(20))
		failedAt := out.Snapshot()
		// Keep producing a little longer: the node must keep refusing, not flip back to 202.
		Eventually(func() int { return out.Snapshot().Unavailable }).
			WithTimeout(10 * time.Second).WithPolling(10 * time.Millisecond).Should(BeNumerically(">=", failedAt.Unavailable+50))
		load.Stop()
		after := out.Snapshot()
		report := fmt.Sprintf("%d answered 202 before the failure, %d more before the first 503, %d after it; %s",
			before.Accepted, failedAt.Accepted-before.Accepted, after.Accepted-failedAt.Accepted, after)
		GinkgoWriter.Println(report)
		AddReportEntry("read-only", report)
		expectOnly503s(out)
		expectAliveAndHealthy(n, c)

		// Writable again: the operator stops the node and remounts the disk.
		n.Kill()
		Expect(disk.Unmount()).To(Succeed())
		Expect(disk.Mount()).To(Succeed())
		Expect(disk.ReadOnly()).To(BeFalse())
		c = startReady(n)
		eventuallyAccepted(n, topic, "writable", out, 15*time.Second)
		accepted := out.Accepted()
		waitCommitted(c, topic, len(accepted))
		drainAndExpectDelivered("read-only data dir, remounted, restarted", c, topic, accepted)
	})
})
