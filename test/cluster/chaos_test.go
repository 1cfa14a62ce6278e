package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// The chaos loops are registered only with NARAD_CHAOS=1 (`make chaos`): they take minutes.
// NARAD_CHAOS_ROUNDS (default 15) and NARAD_CHAOS_SEED (default: the clock) tune them. The loop
// runs on an R = 1 topic and (r6) on an R = 3, M = 2 one; the random kills with data-directory
// wipes of replicated partitions (r5, replication_kill_test.go) run 30 s in `make test` and
// 90 s here.
var _ = chaosSpecs()

func chaosEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func chaosRand() *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("NARAD_CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	logf("chaos seed %d (rerun with NARAD_CHAOS_SEED=%d)", seed, seed)
	AddReportEntry("chaos seed", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// healthy waits until node i is ready and alive, a leader exists, and at least three alive
// members vote.
func healthy(c *harness.Cluster, i int) {
	GinkgoHelper()
	Expect(c.WaitReady(ctx(60*time.Second), i)).To(Succeed())
	Expect(c.WaitMember(ctx(60*time.Second), c.ID(i), client.StatusAlive)).To(Succeed())
	leader(c)
	Expect(c.WaitMembers(ctx(60*time.Second), ">= 3 alive voters", func(l *client.MemberList) bool {
		return harness.AliveVoters(l) >= 3
	})).To(Succeed())
}

func chaosSpecs() bool {
	if os.Getenv("NARAD_CHAOS") != "1" {
		return false
	}
	Describe("Chaos loops (NARAD_CHAOS=1)", func() {
		It("loses no acknowledged message through rounds of kill -9, leader kills and freezes of random nodes under load", func() {
			rng := chaosRand()
			rounds := chaosEnvInt("NARAD_CHAOS_ROUNDS", 15)
			c := newCluster(4)
			chaosLoop(c, rng, rounds, client.CreateTopicRequest{Name: "chaos", Partitions: 8, VisibilityTimeoutMs: visibilityMs})
		})

		It("(r6) loses no acknowledged message of an R=3 M=2 topic through the same rounds of kill -9, leader kills and freezes", func() {
			rng := chaosRand()
			rounds := chaosEnvInt("NARAD_CHAOS_ROUNDS", 15)
			c := newCluster(4, func(o *harness.ClusterOptions) {
				o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
			})
			chaosLoop(c, rng, rounds, client.CreateTopicRequest{Name: "chaos-r3", Partitions: 8, VisibilityTimeoutMs: visibilityMs,
				ReplicationFactor: 3, MinInsyncReplicas: 2})
		})

		It("completes every topic create and leaves none half-created through repeated leader kills", func() {
			rounds := chaosEnvInt("NARAD_CHAOS_ROUNDS", 15) / 2
			c := newCluster(3)
			var names []string
			for r := range max(rounds, 2) {
				lead := leader(c)
				creator := c.Others(lead)[0]
				errc := make(chan error, 1)
				batch := []string{fmt.Sprintf("chaos-create-%d-a", r), fmt.Sprintf("chaos-create-%d-b", r), fmt.Sprintf("chaos-create-%d-c", r)}
				names = append(names, batch...)
				cctx := ctx(90 * time.Second)
				go func() {
					for _, n := range batch {
						if _, err := harness.CreateTopicRetry(cctx, c.Client(creator), topicReq(n)); err != nil {
							errc <- fmt.Errorf("%s: %w", n, err)
							return
						}
					}
					errc <- nil
				}()
				c.Kill(lead)
				Expect(<-errc).To(Succeed())
				Expect(c.Restart(ctx(60*time.Second), lead)).To(Succeed())
				healthy(c, lead)
			}
			h := harness.NewHistory()
			for _, n := range names {
				Expect(waitTopicEverywhere(c, n)).To(HaveLen(3), "%s: every partition assigned, on every live node", n)
				for _, i := range c.Live() {
					Expect(produceN(h, c.Endpoint(i), n, n+"-"+c.ID(i), 3, nil)).To(Equal(3))
				}
				drainQuiet(h, n, c.Endpoints(), 300*time.Millisecond)
			}
			expectClean("creates through leader kills", h)
		})
	})
	return true
}

// chaosLoop creates req's topic on c and, with producers and consumers on every node, runs
// rounds of a random node killed -9, frozen, or the Raft leader killed, each for 1–8 s; then it
// drains the topic and checks that every 202 was delivered.
func chaosLoop(c *harness.Cluster, rng *rand.Rand, rounds int, req client.CreateTopicRequest) {
	GinkgoHelper()
	topic := req.Name
	_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), req)
	Expect(err).NotTo(HaveOccurred())
	waitTopicEverywhere(c, topic)

	h := harness.NewHistory()
	tctx, stop := context.WithCancel(context.Background())
	defer stop()
	pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
		Topic: topic, Prefix: "x", Workers: 4, Endpoints: c.Endpoints(), Interval: 20 * time.Millisecond,
	})
	cst, cwait := harness.StartClusterConsumers(tctx, h, harness.ConsumerOptions{
		Topic: topic, Workers: 3, Endpoints: c.Endpoints(),
	})
	waitAccepted(h, topic, 100, 30*time.Second)

	for r := range rounds {
		victim := rng.IntN(c.Size())
		action := []string{"kill", "freeze", "kill-leader"}[rng.IntN(3)]
		if action == "kill-leader" {
			victim = leader(c)
		}
		down := time.Second + time.Duration(rng.Int64N(int64(7*time.Second)))
		logf("round %d/%d: %s %s for %s (accepted so far %d)", r+1, rounds, action, c.ID(victim), down, len(h.Accepted(topic)))
		if action == "freeze" {
			c.Pause(victim)
		} else {
			c.Kill(victim)
		}
		<-time.After(down) // scenario timing: how long the node stays away
		if action == "freeze" {
			c.Resume(victim)
		} else {
			Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		}
		healthy(c, victim)
	}
	before := len(h.Accepted(topic))
	waitAccepted(h, topic, before+100, 30*time.Second)
	stop()
	pwait()
	cwait()
	logf("producers: %s", pst)
	logf("consumers: %s", cst)
	began := time.Now()
	Expect(harness.DrainAccepted(ctx(3*time.Minute), h, topic, c.Endpoints(), 3*time.Second)).To(Succeed())
	logf("final drain took %s", time.Since(began).Round(time.Millisecond))
	r := expectClean(fmt.Sprintf("chaos on %s (R=%d), %d rounds", topic, max(req.ReplicationFactor, 1), rounds), h)
	logf("duplicates: %d", r.Duplicates)
}
