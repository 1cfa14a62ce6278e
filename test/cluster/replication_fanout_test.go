package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Fan-out cursors of a replicated parent follow its leader (docs/replication.md, "Consumer state
// after a failover"): a new leader resumes each link about where the old one stopped, so a
// child gets duplicates of the last moments before a failover, never a gap and never the whole
// backlog again.

// cursorRecord matches the child and position of a cursor file (docs/internals/storage-format.md §13).
var cursorRecord = regexp.MustCompile(`"child":"([^"]*)","epoch":"[^"]*","next_offset":([0-9]+)`)

// cursorOnDisk returns the next_offset of child's cursor file in node i's directory of
// topic/p, false when it has none.
func cursorOnDisk(c *harness.Cluster, i int, topic string, p int, child string) (int64, bool) {
	dir := filepath.Join(c.Node(i).DataDir, "data", "topics", topic, fmt.Sprintf("p%05d", p))
	files, _ := filepath.Glob(filepath.Join(dir, "fanout-*.cursor"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := cursorRecord.FindSubmatch(b); m != nil && string(m[1]) == child {
			n, err := strconv.ParseInt(string(m[2]), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

var _ = Describe("Replicated fan-out parent", func() {
	It("(r9) R=3 parent: after a kill -9 of a parent partition's leader every 202 reaches the child, and the new leader does not copy the backlog again", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		parent, child := "repl-fan-parent", "repl-fan-child"
		createReplicated(c, parent)
		createChild(c, 1, parent, child, 0)
		waitLinkEverywhere(c, child, parent)
		const p = 0
		st := waitPartition(parent, p, c, 30*time.Second, "three replicas, all in sync", func(st client.PartitionStat) bool {
			return len(st.ISR) == 3 && st.Leader != ""
		})

		// A backlog, fanned out completely before the failover.
		hp, hc := harness.NewHistory(), harness.NewHistory()
		recs := []fanRec{{hp, parent}, {hc, child}}
		bctx, bstop := context.WithCancel(context.Background())
		bwait := startFanProducers(bctx, recs, c.Endpoints(), parent, "b", 6, 0)
		waitAccepted(hp, parent, 1500, 90*time.Second)
		bstop()
		bwait()
		hw, err := harness.HighWatermarks(ctx(10*time.Second), c.Client(0), parent)
		Expect(err).NotTo(HaveOccurred())
		var total int64
		for _, x := range hw {
			total += x
		}
		committedTotal(c, 0, child, total)
		backlog := hw[p]
		logf("backlog: parent high watermarks %v; %s leads p%d", hw, st.Leader, p)
		for _, id := range st.Replicas {
			if id == st.Leader {
				continue
			}
			Eventually(func() int64 {
				n, _ := cursorOnDisk(c, c.Index(id), parent, p, child)
				return n
			}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(Equal(backlog),
				"follower %s holds the leader's cursor of %s at the end of p%d", id, child, p)
		}

		// Traffic on, the leader of p0 killed -9, a new leader elected, the old one back.
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pwait := startFanProducers(tctx, recs, c.Endpoints(), parent, "f", 3, 20*time.Millisecond)
		waitAccepted(hp, parent, len(hp.Accepted(parent))+100, 30*time.Second)
		victim := c.Index(st.Leader)
		c.Kill(victim)
		logf("killed %s, the leader of p%d, with %d accepted", st.Leader, p, len(hp.Accepted(parent)))
		elected := waitPartition(parent, p, c, 30*time.Second, "a new leader", func(now client.PartitionStat) bool {
			return now.Leader != "" && now.Leader != st.Leader && now.LeaderEpoch > st.LeaderEpoch
		})
		logf("p%d: %s leads at epoch %d", p, elected.Leader, elected.LeaderEpoch)
		waitAccepted(hp, parent, len(hp.Accepted(parent))+150, 30*time.Second)
		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		healthy(c, victim)
		waitAccepted(hp, parent, len(hp.Accepted(parent))+100, 30*time.Second)
		stop()
		pwait()

		logChildren(c, 0, parent)
		drain(hc, child, c.Endpoints())
		r := expectClean("child "+child+" of an R=3 parent", hc)
		reportDuplicates(child, r)
		Expect(r.DuplicateCopies).To(BeNumerically("<", backlog/2),
			"the new leader re-copied %d records; p%d's backlog before the failover was %d", r.DuplicateCopies, p, backlog)
	})
})
