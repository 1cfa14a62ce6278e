package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Controlled shutdown (docs/replication.md): SIGTERM moves leadership of every replicated
// partition a node leads to another in-sync replica before the node stops serving.

// unavailable records the produce answers 503 while a spec runs, with when they came.
type unavailable struct {
	mu sync.Mutex
	at []time.Time
}

func (u *unavailable) note(err error) {
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.Status == 503 {
		u.mu.Lock()
		u.at = append(u.at, time.Now())
		u.mu.Unlock()
	}
}

// within counts the 503s from from on and the time between the first and the last of them.
func (u *unavailable) within(from time.Time) (n int, span time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var first, last time.Time
	for _, t := range u.at {
		if t.Before(from) {
			continue
		}
		if n == 0 {
			first = t
		}
		last, n = t, n+1
	}
	return n, last.Sub(first)
}

// produceKeyless sends keyless produces through eps in turn from workers goroutines until ctx
// ends, recording every attempt in h and every 503 in u.
func produceKeyless(ctx context.Context, h *harness.History, u *unavailable, topic string, eps []harness.Endpoint, workers int) func() {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				ep := eps[(w+seq)%len(eps)]
				id := fmt.Sprintf("sd-w%02d-%06d", w, seq)
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := ep.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{})
				cancel()
				h.Produce(topic, ep.Node, id, err)
				u.note(err)
				pause := 20 * time.Millisecond
				if err != nil {
					pause = 100 * time.Millisecond
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	return wg.Wait
}

// shutdownElections returns the lines of node i's log that record an election with reason
// shutdown of topic/p.
func shutdownElections(c *harness.Cluster, i int, topic string, p int) []string {
	GinkgoHelper()
	raw, err := os.ReadFile(c.Node(i).LogPath)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `"msg":"partition leader elected"`) && strings.Contains(line, `"reason":"shutdown"`) &&
			strings.Contains(line, fmt.Sprintf(`"topic":%q`, topic)) && strings.Contains(line, fmt.Sprintf(`"partition":%d,`, p)) {
			out = append(out, line)
		}
	}
	return out
}

var _ = Describe("Replicated partitions: controlled shutdown", func() {
	It("(r12) R=3 M=2: SIGTERM on a leader moves its leaderships off before it exits, produce sees at most a brief 503 window, and every 202 is delivered", func() {
		// The default --replica-failover-after (10 s): a leader change seen right after the
		// node exited is the shutdown's, not a failover.
		c := newCluster(3)
		topic := "repl-shutdown"
		createReplicated(c, topic)
		for p := range 3 {
			waitPartition(topic, p, c, 30*time.Second, "three replicas, all in sync", func(st client.PartitionStat) bool {
				return len(st.Replicas) == 3 && len(st.ISR) == 3 && st.Leader != ""
			})
		}
		// The victim leads a partition and is not the Raft leader when there is such a node.
		raft := leader(c)
		victim, vp := -1, -1
		before := map[int]client.PartitionStat{}
		for p := range 3 {
			st, err := partitionView(c, topic, p)
			Expect(err).NotTo(HaveOccurred())
			before[p] = st
			if i := c.Index(st.Leader); i >= 0 && (victim < 0 || victim == raft && i != raft) {
				victim, vp = i, p
			}
		}
		Expect(victim).To(BeNumerically(">=", 0))
		vid := c.ID(victim)

		h := harness.NewHistory()
		u := &unavailable{}
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pwait := produceKeyless(tctx, h, u, topic, c.Endpoints(), 3)
		waitAccepted(h, topic, 100, 30*time.Second)

		accepted := len(h.Accepted(topic))
		logf("SIGTERM to %s, leader of %s/%d at epoch %d (raft leader %s), %d accepted so far",
			vid, topic, vp, before[vp].LeaderEpoch, c.ID(raft), accepted)
		sigterm := time.Now()
		Expect(c.Stop(victim)).To(Succeed(), "a graceful stop exits 0")
		exited := time.Since(sigterm)
		logf("%s exited %s after SIGTERM", vid, exited.Round(time.Millisecond))

		for p := range 3 {
			if before[p].Leader != vid {
				continue
			}
			Expect(shutdownElections(c, victim, topic, p)).NotTo(BeEmpty(),
				"%s logged the election of %s/%d with reason shutdown before it exited", vid, topic, p)
			now := waitPartition(topic, p, c, 5*time.Second, "a new leader", func(st client.PartitionStat) bool {
				return st.Leader != "" && st.Leader != vid && st.LeaderEpoch > before[p].LeaderEpoch
			})
			logf("%s/%d: %s leads at epoch %d", topic, p, now.Leader, now.LeaderEpoch)
		}
		waitAccepted(h, topic, accepted+100, 30*time.Second)
		n, span := u.within(sigterm)
		logf("produce 503s from SIGTERM on: %d over %s", n, span.Round(time.Millisecond))
		AddReportEntry("produce 503s after SIGTERM", fmt.Sprintf("%d over %s (%s exited %s after SIGTERM)", n,
			span.Round(time.Millisecond), vid, exited.Round(time.Millisecond)))
		Expect(span).To(BeNumerically("<=", 3*time.Second), "503s beyond a brief retry window (%d over %s)", n, span)

		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		Expect(c.WaitMember(ctx(60*time.Second), vid, client.StatusAlive)).To(Succeed())
		for p := range 3 {
			waitPartition(topic, p, c, 90*time.Second, "the restarted replica back in sync", func(st client.PartitionStat) bool {
				return len(st.ISR) == 3
			})
		}
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 30*time.Second)
		stop()
		pwait()
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 controlled shutdown", h)
		logf("duplicates: %d", r.Duplicates)
	})
})
