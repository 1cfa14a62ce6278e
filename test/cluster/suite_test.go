// Package cluster_test proves the failure behaviour of a multi-node narad cluster
// (docs/internals/metastore.md, docs/internals/produce-path.md §4, docs/internals/consume-and-leases.md §1) with real processes on loopback:
// kill -9 of partition owners, of the Raft leader and of accepting nodes, frozen (SIGSTOP)
// owners, quorum loss, restarts on the same data, and cross-node long-poll wake-ups. Every spec
// records each produce attempt and delivery in a harness.History and ends with its check:
// nothing answered 202 is lost, nothing is delivered that was never produced.
//
// Nodes run with --heartbeat-interval 1s --heartbeat-timeout 5s (a silent node is dead after
// 5 s). Longer kill loops run only with NARAD_CHAOS=1 (`make chaos`). Logs of a failed spec (of
// every spec with NARAD_TEST_KEEP_LOGS=1) are kept in $NARAD_TEST_LOGS (default
// $TMPDIR/narad-cluster-logs)/<spec>-<unix time>.
package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestCluster(t *testing.T) {
	suite.Run(t, "narad cluster failure behaviour")
}

// visibilityMs is the lease of every test topic: short, so a delivery whose ack was lost with
// a killed node comes back quickly in the final drain.
const visibilityMs = 5000

// ctx returns a context bounded to d, cancelled when the spec ends.
func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

func logf(format string, args ...any) {
	GinkgoWriter.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// newCluster starts an n-node cluster (3 voters) and registers its cleanup; a failed spec
// keeps the full logs and prints their tails.
func newCluster(n int, mod ...func(*harness.ClusterOptions)) *harness.Cluster {
	GinkgoHelper()
	opts := harness.ClusterOptions{N: n, Logf: logf}
	for _, m := range mod {
		m(&opts)
	}
	c, err := harness.NewCluster(opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		unexpected := c.Unexpected()
		if CurrentSpecReport().Failed() || len(unexpected) > 0 || os.Getenv("NARAD_TEST_KEEP_LOGS") == "1" {
			root := os.Getenv("NARAD_TEST_LOGS")
			if root == "" {
				root = filepath.Join(os.TempDir(), "narad-cluster-logs")
			}
			name := unsafeName.ReplaceAllString(CurrentSpecReport().LeafNodeText, "_")
			if len(name) > 80 {
				name = name[:80]
			}
			dir := filepath.Join(root, fmt.Sprintf("%s-%d", name, time.Now().Unix()))
			if err := c.SaveLogs(dir); err != nil {
				GinkgoWriter.Printf("saving logs: %v\n", err)
			}
			GinkgoWriter.Printf("full node logs in %s\n%s", dir, c.Tails(30))
		}
		c.Cleanup()
		Expect(unexpected).To(BeEmpty(), "nodes exited although the spec did not kill them")
	})
	began := time.Now()
	Expect(c.Start(ctx(120 * time.Second))).To(Succeed())
	AddReportEntry("cluster start", fmt.Sprintf("%d nodes in %s", n, time.Since(began).Round(time.Millisecond)))
	return c
}

// topicReq is a test topic: 3 partitions, a 5 s lease.
func topicReq(name string) client.CreateTopicRequest {
	return client.CreateTopicRequest{Name: name, Partitions: 3, VisibilityTimeoutMs: visibilityMs}
}

// createTopic creates name through node i (retrying 503s) and returns the partition owners
// once every partition is assigned and every live node's replica has the topic. (A follower
// serves topic lookups from its own replica, which applies a committed create a moment after
// the leader: a produce there right after the create could answer 404.)
func createTopic(c *harness.Cluster, i int, name string) []string {
	GinkgoHelper()
	_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(i), topicReq(name))
	Expect(err).NotTo(HaveOccurred(), "create %s through %s", name, c.ID(i))
	owners := waitTopicEverywhere(c, name)
	logf("topic %s: partition owners %v", name, owners)
	return owners
}

// waitTopicEverywhere waits until every live node describes topic with every partition
// assigned and all of them name the same owners, and returns the owners. The owners of a
// replicated topic may change right after the create (a replica of a node started in the
// topic's creation second takes itself for one that lost its disk and hands its leadership
// on, docs/internals/replication.md §6), so the nodes are asked again until they agree.
func waitTopicEverywhere(c *harness.Cluster, name string) []string {
	GinkgoHelper()
	for _, j := range c.Live() {
		began := time.Now()
		_, err := harness.WaitAssigned(ctx(20*time.Second), c.Client(j), name)
		Expect(err).NotTo(HaveOccurred(), "%s describes %s", c.ID(j), name)
		if d := time.Since(began); d > 500*time.Millisecond {
			logf("%s saw topic %s only after %s", c.ID(j), name, d.Round(time.Millisecond))
		}
	}
	var owners []string
	Eventually(func() error {
		owners = nil
		for _, j := range c.Live() {
			o, err := harness.WaitAssigned(ctx(5*time.Second), c.Client(j), name)
			if err != nil {
				return fmt.Errorf("%s describes %s: %w", c.ID(j), name, err)
			}
			if owners != nil && !slices.Equal(o, owners) {
				return fmt.Errorf("%s names owners %v of %s, another node %v", c.ID(j), o, name, owners)
			}
			owners = o
		}
		return nil
	}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "the nodes agree on the owners of %s", name)
	return owners
}

// leader returns the index of the current Raft leader.
func leader(c *harness.Cluster) int {
	GinkgoHelper()
	i, err := c.LeaderIndex(ctx(30 * time.Second))
	Expect(err).NotTo(HaveOccurred())
	return i
}

// ownerNotLeader returns a node index that owns a partition of owners and does not lead Raft,
// and one partition it owns.
func ownerNotLeader(c *harness.Cluster, owners []string, leaderIdx int) (int, int) {
	GinkgoHelper()
	for p, o := range owners {
		if i := c.Index(o); i >= 0 && i != leaderIdx {
			return i, p
		}
	}
	Fail(fmt.Sprintf("no partition owner besides the leader %s among %v", c.ID(leaderIdx), owners))
	return -1, -1
}

// without returns xs minus the given values.
func without(xs []int, drop ...int) []int {
	var out []int
	for _, x := range xs {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// waitAccepted waits until the history holds at least n accepted payloads of topic.
func waitAccepted(h *harness.History, topic string, n int, within time.Duration) {
	GinkgoHelper()
	Eventually(func() int { return len(h.Accepted(topic)) }).WithTimeout(within).WithPolling(20*time.Millisecond).
		Should(BeNumerically(">=", n), "producers made no progress")
}

// drain consumes topic through eps until every accepted payload was delivered and 2 s passed
// without a message (late duplicates get that long to show up).
func drain(h *harness.History, topic string, eps []harness.Endpoint) {
	GinkgoHelper()
	drainQuiet(h, topic, eps, 2*time.Second)
}

// drainQuiet is drain with its own quiet period.
func drainQuiet(h *harness.History, topic string, eps []harness.Endpoint, quiet time.Duration) {
	GinkgoHelper()
	began := time.Now()
	err := harness.DrainAccepted(ctx(90*time.Second), h, topic, eps, quiet)
	logf("drain of %s took %s", topic, time.Since(began).Round(time.Millisecond))
	Expect(err).NotTo(HaveOccurred())
}

// expectClean runs the history check, reports it, and fails on any violation.
func expectClean(label string, h *harness.History) harness.Report {
	GinkgoHelper()
	r := h.Check()
	logf("%s: %s", label, r)
	AddReportEntry(label, r.String())
	Expect(r.Accepted).To(BeNumerically(">", 0), "the scenario produced nothing")
	Expect(r.OK()).To(BeTrue(), "%s: %s", label, r)
	return r
}

// produceN sends n payloads "<prefix>-<seq>" one by one through ep (optionally pinned) and
// records them; it returns how many got a 202.
func produceN(h *harness.History, ep harness.Endpoint, topic, prefix string, n int, partition *int) int {
	ok := 0
	for seq := range n {
		id := fmt.Sprintf("%s-%06d", prefix, seq)
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := ep.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{Partition: partition})
		cancel()
		if h.Produce(topic, ep.Node, id, err) == harness.OutcomeAccepted {
			ok++
		} else {
			logf("produce %s via %s: %v", id, ep.Node, err)
		}
	}
	return ok
}

// durations returns the values of a latency map.
func durations(m map[string]time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	return out
}

// watch logs, every second until the spec ends, how many payloads of topic were accepted and
// how many of those are still undelivered, with the traffic stats.
func watch(h *harness.History, topic string, prod, cons *harness.TrafficStats) {
	wctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				logf("progress: %d accepted, %d undelivered | producers %s | consumers %s",
					len(h.Accepted(topic)), len(h.Missing(topic)), prod, cons)
			}
		}
	}()
}
