package crash_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Fan-out to children of any legal name across a restart", func() {
	// Cursor files are named by a hash of the child (docs/operating.md, Data directory): a
	// child named with ".tmp-" in it no longer loses its cursor file to the parent log's
	// temp-file cleanup, and the longest legal topic name no longer makes a file name too long.
	It("delivers every parent record exactly once to a .tmp- child and a 255-character child", func() {
		n := newNode()
		c := start(n)
		parent := "names-parent"
		children := []string{"names.tmp-child", strings.Repeat("c", 255)}
		createTopic(c, parent)
		for _, child := range children {
			_, err := c.CreateTopic(ctx(10*time.Second), client.CreateTopicRequest{Name: child, Parent: parent})
			Expect(err).NotTo(HaveOccurred())
		}
		caughtUp := func() {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				l, err := c.Children(ctx(5*time.Second), parent)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(l.Children).To(HaveLen(len(children)))
				for _, ch := range l.Children {
					g.Expect(ch.State).To(Equal("active"), "child %.20s", ch.Name)
					g.Expect(ch.LagComplete).To(BeTrue(), "child %.20s", ch.Name)
					g.Expect(ch.LagMessages).To(BeZero(), "child %.20s", ch.Name)
				}
			}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		}
		first, err := harness.ProduceBatches(ctx(30*time.Second), c, parent, "a", 60, 20)
		Expect(err).NotTo(HaveOccurred())
		caughtUp()

		Expect(n.Stop()).To(Succeed())
		c = restart(n) // the parent's logs reopen: their open removes temp files
		second, err := harness.ProduceBatches(ctx(30*time.Second), c, parent, "b", 60, 20)
		Expect(err).NotTo(HaveOccurred())
		caughtUp()

		want := map[string]bool{}
		for _, p := range append(first, second...) {
			want[p] = true
		}
		for _, child := range children {
			got := drainAll(c, child, want)
			expectNoLoss("child "+child[:12], want, got)
			counts := harness.PayloadCounts(got)
			Expect(harness.Duplicates(counts)).To(BeZero(), "child %.20s: every record exactly once across the restart", child)
			Expect(counts).To(HaveLen(len(want)))
		}
	})
})
