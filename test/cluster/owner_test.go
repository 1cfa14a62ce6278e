package cluster_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

var _ = Describe("Partition owners and accepting nodes dying", func() {
	It("(a) loses no acknowledged message when a partition owner is killed -9 under produce and consume on the other nodes", func() {
		c := newCluster(3)
		topic := "owner-kill"
		owners := createTopic(c, 0, topic)
		victim, _ := ownerNotLeader(c, owners, leader(c))
		others := c.Others(victim)

		h := harness.NewHistory()
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "a", Workers: 3, Endpoints: c.Endpoints(others...), Interval: 20 * time.Millisecond,
		})
		cst, cwait := harness.StartClusterConsumers(tctx, h, harness.ConsumerOptions{
			Topic: topic, Workers: 2, Endpoints: c.Endpoints(others...),
		})
		watch(h, topic, pst, cst)
		waitAccepted(h, topic, 100, 20*time.Second)
		c.Kill(victim)
		killedAt := time.Now()
		before := len(h.Accepted(topic))
		// Traffic goes on past the reroute grace (3 s) and the dead verdict (5 s).
		Eventually(func() bool {
			return len(h.Accepted(topic)) >= before+250 && time.Since(killedAt) >= 7*time.Second
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "producers on live nodes keep getting 202: %s", pst)
		stop()
		pwait()
		cwait()
		logf("producers: %s", pst)
		logf("consumers: %s", cst)

		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		Expect(c.WaitMember(ctx(30*time.Second), c.ID(victim), client.StatusAlive)).To(Succeed())
		drain(h, topic, c.Endpoints())
		expectClean("owner kill -9", h)
	})

	It("(c) delivers the WAL records of an accepting node killed -9 right after its 202s, once it restarts", func() {
		c := newCluster(3)
		topic := "ingress-kill"
		owners := createTopic(c, 0, topic)
		lead := leader(c)
		// target owns a partition and does not lead; ingress is the third node (not the leader either
		// unless there is no other choice).
		target, p := ownerNotLeader(c, owners, lead)
		ingress := without(c.Others(target), lead)[0]
		h := harness.NewHistory()

		// Freeze the target so the ingress node cannot commit what it accepts for the target's
		// partition: those records exist only in the ingress node's WAL when it dies.
		c.Pause(target)
		ep := c.Endpoint(ingress)
		const n = 60
		began := time.Now()
		Expect(produceN(h, ep, topic, "c", n, &p)).To(Equal(n), "every produce to the accepting node answers 202")
		c.Kill(ingress)
		logf("%d records for p%d accepted by %s in %s, then it was killed", n, p, ep.Node, time.Since(began).Round(time.Millisecond))
		c.Resume(target)

		// While the accepting node is down its records have no other copy.
		rest := c.Endpoints(c.Others(ingress)...)
		Eventually(func() error { return c.WaitReady(ctx(5*time.Second), target) }).WithTimeout(30 * time.Second).Should(Succeed())
		early := ctx(6 * time.Second)
		_ = harness.DrainAccepted(early, h, topic, rest, time.Second) // expected to end with records missing
		stranded := len(h.Missing(topic))
		logf("before the restart of %s: %d of %d accepted records undelivered", ep.Node, stranded, n)
		AddReportEntry("stranded in the dead node's WAL", fmt.Sprintf("%d of %d", stranded, n))

		Expect(c.Restart(ctx(60*time.Second), ingress)).To(Succeed())
		drain(h, topic, c.Endpoints())
		expectClean("accepting node kill -9", h)
	})

	It("(e) lets a node restarted with the same id and data rejoin and serve its partitions again", func() {
		c := newCluster(3)
		topic := "rejoin"
		owners := createTopic(c, 0, topic)
		victim, p := ownerNotLeader(c, owners, leader(c))
		id := c.ID(victim)
		other := c.Others(victim)
		h := harness.NewHistory()

		Expect(produceN(h, c.Endpoint(other[0]), topic, "e1", 30, &p)).To(Equal(30))
		Eventually(func(g Gomega) int64 {
			hw, err := harness.HighWatermarks(ctx(5*time.Second), c.Client(other[0]), topic)
			g.Expect(err).NotTo(HaveOccurred())
			return hw[p]
		}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", 30), "records committed at %s", id)

		c.Kill(victim)
		Expect(c.WaitMember(ctx(30*time.Second), id, client.StatusDead)).To(Succeed())
		o, unavailable, err := harness.TopicOwners(ctx(10*time.Second), c.Client(other[0]), topic)
		Expect(err).NotTo(HaveOccurred())
		Expect(o[p]).To(Equal(id), "a dead node keeps its partitions (no replication to move them from)")
		Expect(unavailable).To(ContainElement(p), "describe marks the dead owner's partition unavailable")

		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		Expect(c.WaitMember(ctx(30*time.Second), id, client.StatusAlive)).To(Succeed())
		Expect(c.WaitVoters(ctx(30*time.Second), 3)).To(Succeed())
		Eventually(func(g Gomega) {
			o, unavailable, err := harness.TopicOwners(ctx(5*time.Second), c.Client(other[1]), topic)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o[p]).To(Equal(id))
			g.Expect(unavailable).To(BeEmpty())
		}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		// A pinned consume through another node is served by the restarted owner.
		msgs, err := c.Client(other[1]).Consume(ctx(15*time.Second), topic, client.ConsumeOptions{Partition: &p, Wait: 5 * time.Second, Max: 10})
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).NotTo(BeEmpty(), "the rejoined owner serves partition %d", p)
		ds, err := harness.ToDeliveries(msgs)
		Expect(err).NotTo(HaveOccurred())
		h.Deliver(topic, c.ID(other[1]), ds, false)
		Expect(harness.AckAll(ctx(15*time.Second), c.Client(other[1]), topic, ds, time.Now().Add(10*time.Second))).To(Succeed())

		// New records for its partition commit there again.
		Expect(produceN(h, c.Endpoint(other[1]), topic, "e2", 20, &p)).To(Equal(20))
		Eventually(func(g Gomega) int64 {
			hw, err := harness.HighWatermarks(ctx(5*time.Second), c.Client(other[0]), topic)
			g.Expect(err).NotTo(HaveOccurred())
			return hw[p]
		}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", 50))

		drain(h, topic, c.Endpoints())
		expectClean("rejoin after restart", h)
	})

	It("(e') never answers 404 for an existing topic while a restarted node catches up (503 until it knows)", func() {
		c := newCluster(3)
		topic := "restart-404"
		createTopic(c, 0, topic)
		victim := c.Others(leader(c))[0]
		c.Kill(victim)
		// The cluster moves on while the victim is down: its replica will be behind at restart.
		for i := range 3 {
			createTopic(c, c.Others(victim)[0], fmt.Sprintf("restart-404-later-%d", i))
		}
		h := harness.NewHistory()
		ep := c.Endpoint(victim)
		hctx, stop := context.WithCancel(context.Background())
		defer stop()
		codes := map[string]int{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for seq := 0; hctx.Err() == nil; seq++ {
				id := fmt.Sprintf("r404-%06d", seq)
				rctx, cancel := context.WithTimeout(hctx, 5*time.Second)
				err := ep.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{})
				cancel()
				h.Produce(topic, ep.Node, id, err) // a call cut short by the probe's end is "unknown"
				if hctx.Err() != nil {
					return // the end of the probe, not an answer of the node
				}
				codes[harness.ErrorKind(err)]++
				if err != nil {
					<-time.After(5 * time.Millisecond) // pace the probe against a node still booting
				}
			}
		}()
		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		stop()
		<-done
		logf("answers of %s from its start to ready: %v", ep.Node, codes)
		AddReportEntry("answers while booting", fmt.Sprint(codes))
		for kind, n := range codes {
			Expect(kind).NotTo(HavePrefix("http 404"), "%d produce calls to the booting node were told the topic does not exist", n)
		}
		// The probe may end the moment the node turns ready, before any call was accepted: the
		// ready node takes a few more, so the history always has records to account for.
		Expect(produceN(h, ep, topic, "r404-ready", 5, nil)).To(Equal(5))
		drain(h, topic, c.Endpoints())
		expectClean("restart without 404", h)
	})
})
