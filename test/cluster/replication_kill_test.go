package cluster_test

import (
	"context"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/test/harness"
)

// Random kills of replicated partitions (docs/replication.md "What 202 means"): one node of
// three is killed -9 every 3–5 s, every third time with its data directory deleted, while
// producers and consumers work through every node. M = 2 copies of each 202 survive any single
// loss, so nothing may be lost, as long as a second node is never wiped before the first one
// has caught up: each wipe waits until every partition has all three replicas in sync.
//
// `make test` runs the loop for 30 s; `make chaos` (NARAD_CHAOS=1) for 90 s.
// NARAD_REPL_KILL_SECONDS overrides the length, NARAD_CHAOS_SEED the random choices.

// replKillSeconds is the length of the kill loop.
func replKillSeconds() int {
	secs := 30
	if os.Getenv("NARAD_CHAOS") == "1" {
		secs = 90
	}
	return chaosEnvInt("NARAD_REPL_KILL_SECONDS", secs)
}

var _ = Describe("Replicated partitions under random kills", func() {
	It("(r5) R=3 M=2: kill -9 of a random node every 3-5 s, every third one with its data directory deleted, loses no 202", func() {
		loop := time.Duration(replKillSeconds()) * time.Second
		rng := chaosRand()
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic := "repl-kills"
		createReplicated(c, topic)
		allInSync(c, topic, 30*time.Second)

		h := harness.NewHistory()
		tctx, stop := context.WithCancel(context.Background())
		defer stop()
		pst, pwait := harness.StartClusterProducers(tctx, h, harness.ProducerOptions{
			Topic: topic, Prefix: "r5", Workers: 3, Endpoints: c.Endpoints(), Interval: 20 * time.Millisecond,
		})
		cst, cwait := harness.StartClusterConsumers(tctx, h, harness.ConsumerOptions{
			Topic: topic, Workers: 2, Endpoints: c.Endpoints(),
		})
		watch(h, topic, pst, cst)
		waitAccepted(h, topic, 100, 30*time.Second)

		began := time.Now()
		kills, wipes := 0, 0
		for time.Since(began) < loop {
			victim := rng.IntN(c.Size())
			every := 3*time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
			kills++
			wipe := kills%3 == 0
			if wipe {
				// Never two wipes within one catch-up: the last wiped node (and every other
				// replica) is back in every ISR first.
				waited := time.Now()
				allInSync(c, topic, 120*time.Second)
				logf("every replica in sync %s before wipe %d", time.Since(waited).Round(time.Millisecond), wipes+1)
			}
			killedAt := time.Now()
			logf("kill %d at %s: %s%s (accepted so far %d)", kills, killedAt.Sub(began).Round(time.Millisecond), c.ID(victim),
				map[bool]string{true: " with its data directory", false: ""}[wipe], len(h.Accepted(topic)))
			if wipe {
				Expect(c.Wipe(victim)).To(Succeed())
				wipes++
			} else {
				c.Kill(victim)
			}
			Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
			healthy(c, victim)
			<-time.After(time.Until(killedAt.Add(every))) // scenario timing: the next kill comes 3-5 s after this one
		}
		logf("%d kills (%d wipes) in %s", kills, wipes, time.Since(began).Round(time.Millisecond))
		AddReportEntry("random kills", map[string]int{"kills": kills, "wipes": wipes})
		Expect(wipes).To(BeNumerically(">=", 1), "the loop wiped a node")
		settled := time.Now()
		allInSync(c, topic, 120*time.Second)
		logf("every replica in sync %s after the last kill", time.Since(settled).Round(time.Millisecond))
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 30*time.Second)
		stop()
		pwait()
		cwait()
		logf("producers: %s", pst)
		logf("consumers: %s", cst)
		drain(h, topic, c.Endpoints())
		r := expectClean("R=3 random kills with wipes", h)
		logf("duplicates: %d", r.Duplicates)
	})
})
