package crash_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Fan-out across a crash between the child commit and the cursor advance", func() {
	// docs/internals/fanout.md §6: the cursor's durable offset moves past a record only after the
	// child committed it, so a kill -9 right after a child commit and before the cursor write
	// re-sends that slab after the restart: duplicates in the child, never a gap.
	It("delivers every parent record to the child after kill -9 at fanout.after_child_commit", func() {
		n := newNode()
		c := start(n)
		createTopic(c, "fo-parent")
		_, err := c.CreateTopic(ctx(10*time.Second), client.CreateTopicRequest{Name: "fo-child", Parent: "fo-parent"})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Stop()).To(Succeed())

		// Restart with the fault armed: the process dies at the third cursor advance.
		c = start(n, "NARAD_FAULTS=fanout.after_child_commit=crash@3")
		want := map[string]bool{}
		for i := 0; i < 200; i++ {
			body := fmt.Sprintf("fo-%03d", i)
			if err := c.Produce(ctx(10*time.Second), "fo-parent", []byte(body), client.ProduceOptions{}); err != nil {
				break // the crash came while producing: what got a 202 is what must arrive
			}
			want[body] = true
		}
		Expect(n.Wait(30*time.Second)).To(Succeed(), "the fault point must have killed the process")
		Expect(n.ExitSignal().String()).To(Equal("killed"))

		c = restart(n)
		got := drainAll(c, "fo-child", want)
		expectNoLoss("fan-out child after a crash before the cursor advance", want, got)
		counts := harness.PayloadCounts(got)
		Expect(harness.Duplicates(counts)).To(BeNumerically(">", 0),
			"the slab committed before the crash is re-sent: at least one duplicate proves the fault fired after a child commit")
	})
})
