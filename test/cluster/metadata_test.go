package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Metadata through Raft leader and voter loss", func() {
	It("(b) finishes every topic create retried on 503 across a kill -9 of the Raft leader, with no topic half-created", func() {
		c := newCluster(3)
		oldLeader := leader(c)
		creator := c.Others(oldLeader)[0]
		names := make([]string, 8)
		for i := range names {
			names[i] = fmt.Sprintf("leader-kill-%d", i)
		}

		var done atomic.Int32
		errs := make([]error, len(names))
		attempts := make([]int, len(names))
		var wg sync.WaitGroup
		wg.Add(1)
		cctx := ctx(90 * time.Second)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i, name := range names {
				attempts[i], errs[i] = harness.CreateTopicRetry(cctx, c.Client(creator), topicReq(name))
				done.Add(1)
			}
		}()
		Eventually(done.Load).WithTimeout(30 * time.Second).WithPolling(5 * time.Millisecond).Should(BeNumerically(">=", 2))
		logf("killing the leader with %d of %d creates done", done.Load(), len(names))
		c.Kill(oldLeader)
		killedAt := time.Now()
		wg.Wait()
		logf("creates finished %s after the kill; attempts per topic %v", time.Since(killedAt).Round(time.Millisecond), attempts)
		AddReportEntry("create attempts", fmt.Sprint(attempts))
		for i, err := range errs {
			Expect(err).NotTo(HaveOccurred(), "create %s", names[i])
		}
		newLeader := leader(c)
		Expect(newLeader).NotTo(Equal(oldLeader))
		logf("new leader %s", c.ID(newLeader))

		h := harness.NewHistory()
		live := c.Others(oldLeader)
		for _, name := range names {
			Expect(waitTopicEverywhere(c, name)).To(HaveLen(3), "%s: every partition assigned, on every live node", name)
			for _, i := range live {
				Expect(produceN(h, c.Endpoint(i), name, name+"-"+c.ID(i), 5, nil)).To(Equal(5))
			}
		}
		Expect(c.Restart(ctx(60*time.Second), oldLeader)).To(Succeed())
		Expect(c.WaitMember(ctx(30*time.Second), c.ID(oldLeader), client.StatusAlive)).To(Succeed())
		all, err := c.Client(oldLeader).AllTopics(ctx(10 * time.Second))
		Expect(err).NotTo(HaveOccurred())
		listed := make([]string, 0, len(all))
		for _, t := range all {
			listed = append(listed, t.Name)
		}
		Expect(listed).To(ContainElements(names), "the restarted old leader caught up on every topic")
		for _, name := range names {
			drainQuiet(h, name, c.Endpoints(), 300*time.Millisecond)
		}
		expectClean("leader kill during creates", h)
	})

	It("(f) keeps serving metadata after losing one of three voters, placing new topics on live nodes only, and its metrics count the lost member dead", func() {
		c := newCluster(3)
		lead := leader(c)
		victim := c.Others(lead)[0]
		live := c.Others(victim)
		c.Kill(victim)

		began := time.Now()
		n, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(live[1]), topicReq("one-voter-down-a"))
		Expect(err).NotTo(HaveOccurred())
		logf("create with one voter down: %d attempts, %s", n, time.Since(began).Round(time.Millisecond))

		Expect(c.WaitMember(ctx(30*time.Second), c.ID(victim), client.StatusDead)).To(Succeed())

		By("every live node's scrape counts the killed member dead and sees the one Raft leader")
		Eventually(func(g Gomega) {
			leaders := 0.0
			for _, i := range live {
				e, err := harness.ScrapeMetrics(ctx(5*time.Second), c.URL(i))
				g.Expect(err).NotTo(HaveOccurred())
				dead, _ := e.Value("narad_cluster_members", map[string]string{"status": "dead"})
				alive, _ := e.Value("narad_cluster_members", map[string]string{"status": "alive"})
				g.Expect([]float64{dead, alive}).To(Equal([]float64{1, 2}), "%s: members dead, alive", c.ID(i))
				hasLeader, _ := e.Value("narad_raft_has_leader", nil)
				g.Expect(hasLeader).To(Equal(1.0), "%s: narad_raft_has_leader", c.ID(i))
				l, _ := e.Value("narad_raft_leader", nil)
				leaders += l
			}
			g.Expect(leaders).To(Equal(1.0), "narad_raft_leader summed over the live nodes")
		}).WithTimeout(20 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		topic := "one-voter-down-b"
		owners := createTopic(c, live[0], topic)
		Expect(owners).NotTo(ContainElement(c.ID(victim)), "placement skips dead members")

		h := harness.NewHistory()
		for _, i := range live {
			Expect(produceN(h, c.Endpoint(i), topic, "f-"+c.ID(i), 25, nil)).To(Equal(25))
		}
		drain(h, topic, c.Endpoints(live...))
		expectClean("one voter down", h)
	})

	It("(g) answers 503 to metadata writes after losing two of three voters while produce and consume of the live owner go on", func() {
		c := newCluster(3)
		topic := "two-voters-down"
		owners := createTopic(c, 0, topic)
		survivor := 0
		mine := harness.PartitionsOwnedBy(owners, c.ID(survivor))
		Expect(mine).NotTo(BeEmpty(), "every node owns a partition of a 3-partition topic")
		h := harness.NewHistory()
		ep := c.Endpoint(survivor)
		Expect(produceN(h, ep, topic, "g1", 30, nil)).To(Equal(30))

		dead := c.Others(survivor)
		for _, i := range dead {
			c.Kill(i)
		}

		// Metadata writes must fail with 503 — never succeed, never hang past the request bound.
		var createErr error
		Eventually(func() bool {
			began := time.Now()
			rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, createErr = c.Client(survivor).CreateTopic(rctx, topicReq("no-quorum"))
			logf("create without quorum: %v after %s", createErr, time.Since(began).Round(time.Millisecond))
			Expect(createErr).To(HaveOccurred(), "a create cannot commit without a quorum")
			return client.IsStatus(createErr, http.StatusServiceUnavailable)
		}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(BeTrue(), func() string {
			return fmt.Sprintf("metadata writes answer 503 (last answer: %v)", createErr)
		})

		// Produce keeps getting 202 on the live node, and its own partitions keep delivering.
		Expect(produceN(h, ep, topic, "g2", 30, nil)).To(Equal(30), "produce on a live node without quorum")
		p := mine[0]
		Expect(produceN(h, ep, topic, "g3", 10, &p)).To(Equal(10))
		var pinned []string
		for seq := range 10 {
			pinned = append(pinned, fmt.Sprintf("g3-%06d", seq))
		}
		Eventually(func() []string {
			msgs, err := c.Client(survivor).Consume(ctx(10*time.Second), topic, client.ConsumeOptions{Partition: &p, Wait: time.Second, Max: 100})
			if err != nil {
				logf("pinned consume of p%d: %v", p, err)
			}
			ds, err := harness.ToDeliveries(msgs)
			Expect(err).NotTo(HaveOccurred())
			h.Deliver(topic, ep.Node, ds, false)
			if len(ds) > 0 {
				Expect(harness.AckAll(ctx(10*time.Second), c.Client(survivor), topic, ds, time.Now().Add(5*time.Second))).To(Succeed())
			}
			_, undelivered := h.Latencies(pinned)
			return undelivered
		}).WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).Should(BeEmpty(), "the live owner's partition delivers without quorum")

		for _, i := range dead {
			Expect(c.Restart(ctx(60*time.Second), i)).To(Succeed())
		}
		Expect(c.WaitVoters(ctx(60*time.Second), 3)).To(Succeed())
		drain(h, topic, c.Endpoints())
		expectClean("two voters down", h)
	})
})
