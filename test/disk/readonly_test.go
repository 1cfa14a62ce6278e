package disk_test

import (
	"fmt"
	"strings"
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
		// Keep producing a little longer: the refusal is not a blip, and every call that was in
		// flight when the filesystem failed has its answer recorded.
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
		drainAndExpectDelivered("read-only data dir, remounted, restarted", c, topic, accepted)
	})

	It("never answers 202 when started on a read-only data directory, and starts with every 202 intact once it is writable", func() {
		fs := mountTmpfs(64)
		n := newNodeOn(fs.Dir)
		c := startReady(n)
		topic := "read-only-start"
		createTopic(c, topic)
		p := NewProducer(n.URL(), topic, "before", 1024)
		DeferCleanup(p.Close)
		out := NewOutcome()
		for range 200 {
			Expect(p.Once(out)).To(Equal(202))
		}
		Expect(n.Stop()).To(Succeed())
		Expect(fs.SetReadOnly(true)).To(Succeed())

		// A node that cannot write its data dir may refuse to start (exit non-zero and say why)
		// or run and refuse produce with 503; it must never accept.
		Expect(n.Start()).To(Succeed())
		ready := false
		Eventually(func() bool {
			if !n.Running() {
				return true
			}
			_, err := c.Readyz(ctx(time.Second))
			ready = err == nil
			return ready
		}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(),
			"the node neither became ready nor exited on a read-only data dir")
		if ready {
			probe := NewProducer(n.URL(), topic, "ro", 1024)
			DeferCleanup(probe.Close)
			Expect(probe.Once(out)).To(Equal(503), "produce on a read-only data dir must answer 503")
			expectOnly503s(out)
			n.Kill()
		} else {
			Expect(n.Wait(5 * time.Second)).To(Succeed())
			Expect(n.ExitErr()).To(HaveOccurred(), "a node that cannot open its data dir exits non-zero")
			why := lineWith(n.Tail(20), "read-only file system")
			Expect(why).NotTo(BeEmpty(), "a node that refuses to start says why in its log")
			AddReportEntry("read-only start", "refused to start: "+why)
		}

		Expect(fs.SetReadOnly(false)).To(Succeed())
		c = startReady(n)
		accepted := out.Accepted()
		drainAndExpectDelivered("started on a read-only data dir, then writable", c, topic, accepted)
	})
})

// lineWith returns the first line of s containing sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
