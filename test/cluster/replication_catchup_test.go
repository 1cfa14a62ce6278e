package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// A follower that starts empty while its leader holds tens of MiB pre-copies the leader's
// sealed segment whole (a segment rolls at 64 MiB), then copies the rest in catch-up answers of
// 8 MiB, appended with direct I/O while it is still behind the HWM
// (docs/internals/replication.md §5, docs/internals/storage-format.md §20).
const (
	bulkRecords     = 320
	bulkRecordBytes = 256 << 10 // 80 MiB in all, in one partition: one sealed segment and more
)

// fillPartition produces n records of size bytes ("<prefix>-<seq>-" padded with the sequence
// number) to partition p through ep, four at a time, each recorded in h; it returns how many
// got a 202.
func fillPartition(h *harness.History, ep harness.Endpoint, topic, prefix string, p, n, size int) int {
	var ok atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for seq := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := fmt.Sprintf("%s-%04d-", prefix, seq)
			payload := id + strings.Repeat(fmt.Sprintf("%04d", seq), size/4)[:size-len(id)]
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := ep.Client.Produce(rctx, topic, []byte(payload), client.ProduceOptions{Partition: &p})
			cancel()
			h.Produce(topic, ep.Node, payload, err)
			if err == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}

// firstSegment reads partition p's first segment file of topic on node i.
func firstSegment(c *harness.Cluster, i int, topic string, p int) []byte {
	GinkgoHelper()
	path := filepath.Join(c.Node(i).DataDir, "data", "topics", topic, fmt.Sprintf("p%05d", p), fmt.Sprintf("%020d.log", 0))
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// replicatedBytesIn reads narad_replication_bytes_total{direction="in"} of node i.
func replicatedBytesIn(c *harness.Cluster, i int) (float64, error) {
	b, err := c.Client(i).Metrics(ctx(5 * time.Second))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, `narad_replication_bytes_total{direction="in"} `); ok {
			return strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	return 0, fmt.Errorf("no replicated bytes in node %d's metrics", i)
}

var _ = Describe("A wiped follower far behind its leader", func() {
	It("(r19) R=3 M=2: a follower wiped after 80 MiB reached one partition pre-copies the sealed segment and fetches the rest, rejoins the ISR with a copy byte for byte the leader's, and every 202 is delivered", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-bulk"
		createReplicated(c, topic)
		const p = 0
		st := waitPartition(topic, p, c, 30*time.Second, "three replicas, all in sync", func(st client.PartitionStat) bool {
			return len(st.Replicas) == 3 && len(st.ISR) == 3 && st.Leader != ""
		})
		leader := c.Index(st.Leader)
		h := harness.NewHistory()
		began := time.Now()
		Expect(fillPartition(h, c.Endpoint(leader), topic, "r19-bulk", p, bulkRecords, bulkRecordBytes)).To(Equal(bulkRecords),
			"every bulk record is accepted by a healthy cluster")
		logf("p%d: %d records of %d KiB accepted in %s", p, bulkRecords, bulkRecordBytes>>10, time.Since(began).Round(time.Millisecond))

		victim := -1
		for _, id := range st.Replicas {
			if id != st.Leader {
				victim = c.Index(id)
				break
			}
		}
		waitPartition(topic, p, c, 60*time.Second, "every replica at the leader's end", func(now client.PartitionStat) bool {
			return len(now.ISR) == 3 && now.FollowerLag[c.ID(victim)] == 0
		})
		logf("p%d: wiping its follower %s", p, c.ID(victim))
		Expect(c.Wipe(victim)).To(Succeed())

		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "r19", Workers: 2, Endpoints: c.Endpoints(c.Others(victim)...), Interval: 20 * time.Millisecond,
		})
		watch(h, topic, pst, &harness.TrafficStats{})
		restarted := time.Now()
		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		// Until the restarted node has left the ISR (it finds itself empty), the ISR still holds
		// it from before the wipe: its replicated bytes in, counted from its restart, tell.
		Eventually(func() (float64, error) { return replicatedBytesIn(c, victim) }).WithTimeout(180*time.Second).
			WithPolling(500*time.Millisecond).Should(BeNumerically(">=", bulkRecords*bulkRecordBytes),
			"the wiped follower fetches the bulk again")
		back := waitPartition(topic, p, c, 120*time.Second, "the wiped follower back in the isr", func(now client.PartitionStat) bool {
			return slices.Contains(now.ISR, c.ID(victim)) && len(now.ISR) == 3
		})
		logf("p%d: %s copied the bulk and is in the isr %v, %s after its restart", p, c.ID(victim), back.ISR,
			time.Since(restarted).Round(time.Millisecond))
		stop()
		pwait()
		logf("producers: %s", pst)

		// Producers stopped: the follower reaches the leader's end, and its first segment holds
		// the leader's bytes.
		waitPartition(topic, p, c, 60*time.Second, "the follower at the leader's end", func(now client.PartitionStat) bool {
			lag, ok := now.FollowerLag[c.ID(victim)]
			return ok && lag == 0 && slices.Contains(now.ISR, c.ID(victim))
		})
		lead := c.Index(back.Leader)
		Eventually(func() bool {
			return bytes.Equal(firstSegment(c, victim, topic, p), firstSegment(c, lead, topic, p))
		}).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(BeTrue(),
			"the wiped follower's segment equals its leader's")
		Expect(len(firstSegment(c, victim, topic, p))).To(BeNumerically(">=", 64<<20), "the first segment is sealed")
		logs, err := os.ReadFile(c.Node(victim).LogPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(logs)).To(ContainSubstring("pre-copied the leader's segments"),
			"the wiped follower copied the sealed segment whole, not by fetch")

		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 bulk catch-up", h)
		logf("duplicates: %d", r.Duplicates)
	})
})
