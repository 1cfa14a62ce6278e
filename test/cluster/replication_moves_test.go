package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// R = 3, M = 2 variants of the move and decommission suite (moves_test.go): a replicated
// partition leaves a node by replica reassignment (docs/replication.md#moves,
// docs/internals/replication.md §9) — the destination joins as a follower, enters the ISR,
// leadership moves by an epoch bump, then the source is dropped — with no produce freeze. Every
// spec accounts for every 202 (none lost) and prints the duplicates.

// loadRetries is how often a load worker sends one message again after a 503 before it gives
// up on it.
const loadRetries = 30

// loadTimeout bounds one produce call of the load: an answer slower than that is a failure
// (a produce freeze), not a retry.
const loadTimeout = 10 * time.Second

// retryLoad is produce and consume load on several topics. Each producer worker sends keyless
// messages through its endpoints in turn and retries a message answered 503 with the same
// payload, at the next endpoint: docs/replication.md documents 503 as the retryable answer of a
// produce while a partition is below M (not_enough_replicas) or while its leader changes, and
// a retry may store the message twice, never lose it. Every other failure (a timeout, a
// reset connection, a 4xx) is counted and not retried.
type retryLoad struct {
	h      *harness.History
	topics []string
	cons   []*harness.TrafficStats
	stop   func()

	mu      sync.Mutex
	okAt    []time.Time    // every 202, in arrival order per worker (sorted on read)
	retried map[string]int // "<node> <error kind>" of each 503 retried
	failed  map[string]int // "<node> <error kind>" of every failure not retried
	gaveUp  int            // messages still 503 after loadRetries retries
}

// startRetryLoad runs two producer workers (a message every interval) and one consumer
// worker per topic, all through eps.
func startRetryLoad(topics []string, eps []harness.Endpoint, interval time.Duration) *retryLoad {
	l := &retryLoad{h: harness.NewHistory(), topics: topics, retried: map[string]int{}, failed: map[string]int{}}
	tctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var waits []func()
	for _, topic := range topics {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.produceLoop(tctx, topic, w, eps, interval)
			}()
		}
		st, cw := harness.StartClusterConsumers(tctx, l.h, harness.ConsumerOptions{Topic: topic, Workers: 1, Endpoints: eps})
		l.cons = append(l.cons, st)
		waits = append(waits, cw)
	}
	stopped := false
	l.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		wg.Wait()
		for _, w := range waits {
			w()
		}
	}
	DeferCleanup(l.stop)
	return l
}

// produceLoop is one producer worker of topic.
func (l *retryLoad) produceLoop(ctx context.Context, topic string, w int, eps []harness.Endpoint, interval time.Duration) {
	for seq := 0; ctx.Err() == nil; seq++ {
		id := fmt.Sprintf("%s-w%d-%06d", topic, w, seq)
		for attempt := 0; ; attempt++ {
			ep := eps[(w+seq+attempt)%len(eps)]
			rctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
			err := ep.Client.Produce(rctx, topic, []byte(id), client.ProduceOptions{})
			cancel()
			l.h.Produce(topic, ep.Node, id, err)
			if !l.note(ctx, ep.Node, err, attempt) {
				break
			}
			if !harness.SleepCtx(ctx, 200*time.Millisecond) {
				return
			}
		}
		if !harness.SleepCtx(ctx, interval) {
			return
		}
	}
}

// note counts one produce answer and reports whether the message is to be sent again.
func (l *retryLoad) note(ctx context.Context, node string, err error, attempt int) (retry bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.okAt = append(l.okAt, time.Now())
		return false
	}
	kind := node + " " + harness.ErrorKind(err)
	var apiErr *client.Error
	switch {
	case !errors.As(err, &apiErr) || apiErr.Status != 503:
		l.failed[kind]++
		return false
	case ctx.Err() != nil: // the load stops: neither retried nor given up
		return false
	case attempt == loadRetries:
		l.gaveUp++
		l.failed[kind]++
		return false
	}
	l.retried[kind]++
	return true
}

func (l *retryLoad) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.okAt)
}

// longestGap is the longest time between two consecutive 202s (over every worker) within
// [from, to]: how long the load went without any message accepted.
func (l *retryLoad) longestGap(from, to time.Time) time.Duration {
	l.mu.Lock()
	at := slices.Clone(l.okAt)
	l.mu.Unlock()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	prev := from
	for _, t := range at {
		if t.Before(from) || t.After(to) {
			continue
		}
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return max(gap, to.Sub(prev))
}

func (l *retryLoad) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d accepted; 503s retried %s; failures not retried %s; %d given up", len(l.okAt),
		countsText(l.retried), countsText(l.failed), l.gaveUp)
	for i, topic := range l.topics {
		fmt.Fprintf(&b, "\n  %s consumers: %s", topic, l.cons[i])
	}
	return b.String()
}

// countsText renders a count map in key order ("none" when empty).
func countsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("[%d× %s]", m[k], k)
	}
	return strings.Join(parts, " ")
}

// finish stops the load, checks that every message was answered 202 (a 503 retried until it
// was), drains every topic through eps and checks the history; it returns the check.
func (l *retryLoad) finish(label string, eps []harness.Endpoint) harness.Report {
	GinkgoHelper()
	l.stop()
	logf("%s load: %s", label, l)
	l.mu.Lock()
	failed, gaveUp := countsText(l.failed), l.gaveUp
	l.mu.Unlock()
	Expect(gaveUp).To(BeZero(), "every message answered 503 was accepted on a retry: %s", failed)
	Expect(failed).To(Equal("none"), "every produce was answered 202 or a retryable 503")
	for _, topic := range l.topics {
		drain(l.h, topic, eps)
	}
	r := expectClean(label, l.h)
	logf("%s: %d duplicate deliveries over %d ids, %d extra stored copies", label, r.Duplicates, len(r.DuplicateIDs), r.DuplicateCopies)
	AddReportEntry(label+" duplicates", fmt.Sprintf("%d deliveries over %d ids, %d extra stored copies", r.Duplicates, len(r.DuplicateIDs), r.DuplicateCopies))
	return r
}

// createR3 creates topic with R = 3, M = 2 and the given partitions through node 0 and waits
// until every partition has three replicas, all in sync.
func createR3(c *harness.Cluster, topic string, partitions int) {
	GinkgoHelper()
	_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(0), client.CreateTopicRequest{
		Name: topic, Partitions: partitions, VisibilityTimeoutMs: visibilityMs, ReplicationFactor: 3, MinInsyncReplicas: 2})
	Expect(err).NotTo(HaveOccurred(), "create %s", topic)
	waitTopicEverywhere(c, topic)
	waitReplicaSets(c, topic, partitions, 3, 60*time.Second)
}

// replicaSets lists every partition as node i knows it.
func replicaSets(c *harness.Cluster, i int) ([]client.PartitionReplicas, error) {
	rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Client(i).AllClusterPartitions(rctx, false)
}

func partKey(p client.PartitionReplicas) string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// setKey is a replica list as a set (sorted, joined).
func setKey(ids []string) string {
	s := slices.Clone(ids)
	sort.Strings(s)
	return strings.Join(s, ",")
}

// reassignWatch samples every partition through one node every 100 ms while replicas move,
// and checks the reassignment's order on every sample (docs/internals/replication.md §9):
// never fewer than R = 3 replicas nor M = 2 in sync; a partition that has just lost a replica
// holds all of its replicas in the ISR (the destination entered the ISR before the source was
// dropped); no node listed in mustNotComplete ever ends up among exactly R replicas while out
// of the ISR (a move completed without its destination in sync).
type reassignWatch struct {
	stop func()

	mu         sync.Mutex
	last       map[string]client.PartitionReplicas
	samples    int
	joined     map[string]bool   // partitions seen with a replica outside the ISR above R
	full       map[string]string // per partition, its last R-member replica set (sorted ids)
	changes    int               // changes between two R-member replica sets of a partition
	violations []string
	// mustNotComplete: nodes whose replicas must never be counted in a completed move
	// without being in the ISR.
	mustNotComplete []string
}

func startReassignWatch(c *harness.Cluster, via int, mustNotComplete ...string) *reassignWatch {
	w := &reassignWatch{last: map[string]client.PartitionReplicas{}, joined: map[string]bool{}, full: map[string]string{},
		mustNotComplete: mustNotComplete}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for harness.SleepCtx(wctx, 100*time.Millisecond) {
			ps, err := replicaSets(c, via)
			if err == nil {
				w.sample(ps)
			}
		}
	}()
	stopped := false
	w.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	DeferCleanup(w.stop)
	return w
}

func (w *reassignWatch) sample(ps []client.PartitionReplicas) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	at := time.Now().Format("15:04:05.000")
	for _, p := range ps {
		if p.ReplicationFactor != 3 {
			continue
		}
		k := partKey(p)
		if len(p.Replicas) < 3 || len(p.ISR) < 2 {
			w.violations = append(w.violations, fmt.Sprintf("%s %s: replicas %v isr %v below R or M", at, k, p.Replicas, p.ISR))
		}
		if len(p.Replicas) > 3 && len(p.ISR) < len(p.Replicas) {
			w.joined[k] = true
		}
		for _, id := range w.mustNotComplete {
			if len(p.Replicas) == 3 && slices.Contains(p.Replicas, id) && !slices.Contains(p.ISR, id) {
				w.violations = append(w.violations, fmt.Sprintf("%s %s: move completed with %s out of the isr: replicas %v isr %v", at, k, id, p.Replicas, p.ISR))
			}
		}
		prev, seen := w.last[k]
		w.last[k] = p
		if seen && len(p.ISR) != len(p.Replicas) &&
			slices.ContainsFunc(prev.Replicas, func(id string) bool { return !slices.Contains(p.Replicas, id) }) {
			w.violations = append(w.violations, fmt.Sprintf("%s %s: a replica dropped from %v leaving %v with isr %v", at, k, prev.Replicas, p.Replicas, p.ISR))
		}
		if len(p.Replicas) == 3 {
			if full, ok := w.full[k]; ok && full != setKey(p.Replicas) {
				w.changes++
			}
			w.full[k] = setKey(p.Replicas)
		}
	}
}

// summary stops the watch and returns what it saw.
func (w *reassignWatch) summary() (samples, joined, changes int, violations []string) {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples, len(w.joined), w.changes, slices.Clone(w.violations)
}

// expectOrderly stops the watch, logs it and fails on a violation.
func (w *reassignWatch) expectOrderly(label string) (changes int) {
	GinkgoHelper()
	samples, joined, changes, violations := w.summary()
	logf("%s: %d samples, %d partitions seen with a joining replica out of sync, %d replica-set changes, %d violations",
		label, samples, joined, changes, len(violations))
	Expect(violations).To(BeEmpty(), "%s: every reassignment kept R replicas and M in sync and dropped a replica only once the rest were in sync", label)
	return changes
}

// replicasOn counts the replica lists (of R = 3 topics) that name id, as node i knows them.
func replicasOn(c *harness.Cluster, i int, id string) int {
	GinkgoHelper()
	ps, err := replicaSets(c, i)
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, p := range ps {
		if slices.Contains(p.Replicas, id) {
			n++
		}
	}
	return n
}

// ledBy returns the partitions (of R = 3 topics) node id leads, as node i knows them.
func ledBy(c *harness.Cluster, i int, id string) []client.PartitionReplicas {
	GinkgoHelper()
	ps, err := replicaSets(c, i)
	Expect(err).NotTo(HaveOccurred())
	var out []client.PartitionReplicas
	for _, p := range ps {
		if p.Leader == id {
			out = append(out, p)
		}
	}
	return out
}

// expectLeadershipMoved checks that every partition of was is led by another node at a later
// epoch (leadership moved by an epoch bump).
func expectLeadershipMoved(c *harness.Cluster, i int, was []client.PartitionReplicas) {
	GinkgoHelper()
	ps, err := replicaSets(c, i)
	Expect(err).NotTo(HaveOccurred())
	for _, b := range was {
		j := slices.IndexFunc(ps, func(p client.PartitionReplicas) bool { return partKey(p) == partKey(b) })
		Expect(j).To(BeNumerically(">=", 0), "%s listed", partKey(b))
		now := ps[j]
		logf("%s: leader %s epoch %d → %s epoch %d", partKey(b), b.Leader, b.LeaderEpoch, now.Leader, now.LeaderEpoch)
		Expect(now.Leader).NotTo(Equal(b.Leader), "%s has a new leader", partKey(b))
		Expect(now.LeaderEpoch).To(BeNumerically(">", b.LeaderEpoch), "%s: leadership moved by an epoch bump", partKey(b))
	}
}

// waitBalanced waits until every partition of topics has three replicas, all in sync, no
// replica move is in flight, and every node of ids holds between lo and hi replicas.
func waitBalanced(c *harness.Cluster, topics []string, partitions int, ids []string, lo, hi int, within time.Duration) map[string]int {
	GinkgoHelper()
	var counts map[string]int
	Eventually(func() error {
		counts = map[string]int{}
		for _, topic := range topics {
			now, settled, err := replicaCounts(c, topic, partitions, 3)
			if err != nil {
				return err
			}
			if !settled {
				return fmt.Errorf("%s: replica sets not settled: %v", topic, now)
			}
			for id, n := range now {
				counts[id] += n
			}
		}
		for _, id := range ids {
			if n := counts[id]; n < lo || n > hi {
				return fmt.Errorf("%s holds %d replicas: %v", id, n, counts)
			}
		}
		mvs, err := c.Client(c.Live()[0]).Moves(ctx(5*time.Second), false)
		if err != nil {
			return err
		}
		if len(mvs) != 0 {
			return fmt.Errorf("%d moves in flight", len(mvs))
		}
		return nil
	}).WithTimeout(within).WithPolling(time.Second).Should(Succeed(), func() string { return c.Tails(15) })
	logf("balanced: %v", counts)
	return counts
}

// decommissionVictim picks, among the nodes other than the Raft leader, a voter that leads a
// partition of an R = 3 topic (else any voter, else any node other than the leader).
func decommissionVictim(c *harness.Cluster) int {
	GinkgoHelper()
	lead := leader(c)
	best, score := -1, -1
	for i := range c.Size() {
		if i == lead {
			continue
		}
		m, _ := member(c, lead, c.ID(i))
		s := 0
		if m.RaftRole == "voter" {
			s += 2
		}
		if len(ledBy(c, lead, c.ID(i))) > 0 {
			s++
		}
		if s > score {
			best, score = i, s
		}
	}
	Expect(best).To(BeNumerically(">=", 0))
	return best
}

var _ = Describe("Replica reassignment under load (R=3 move and decommission suite)", func() {
	It("(r15) R=3 M=2: one live node of four is decommissioned under produce and consume load: each replica is reassigned (destination in sync before the source leaves, leadership by epoch bump), the node stays draining across a restart mid-drain, ends with no replica, leaves Raft, and nothing is lost", func() {
		c := newCluster(4, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topics := topicsNamed("r3shrink", 2)
		for _, t := range topics {
			createR3(c, t, 3)
		}
		victim := decommissionVictim(c)
		victimID := c.ID(victim)
		others := c.Others(victim)
		via := others[0]
		led := ledBy(c, via, victimID)
		logf("decommissioning %s: %d replicas, leads %d partitions; raft leader %s", victimID, replicasOn(c, via, victimID), len(led), c.ID(leader(c)))

		load := startRetryLoad(topics, c.Endpoints(others...), 20*time.Millisecond)
		Eventually(load.accepted).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 200))

		v, err := c.Client(via).Decommission(ctx(10*time.Second), victimID, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Allowed).To(BeTrue(), "dry run: %+v", v)
		watch := startReassignWatch(c, via)
		began := time.Now()
		_, err = c.Client(via).Decommission(ctx(10*time.Second), victimID, false)
		Expect(err).NotTo(HaveOccurred())

		// Mid-drain: once a destination has joined a partition of the victim, restart the
		// victim (SIGTERM, as an operator's rolling restart does, then start it again).
		Eventually(func() bool {
			ps, err := replicaSets(c, via)
			return err == nil && slices.ContainsFunc(ps, func(p client.PartitionReplicas) bool {
				return len(p.Replicas) > 3 && slices.Contains(p.Replicas, victimID)
			})
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "a destination joins a partition of %s", victimID)
		still := replicasOn(c, via, victimID)
		logf("restarting %s mid-drain, still a replica of %d partitions", victimID, still)
		Expect(still).To(BeNumerically(">", 0), "the restart happens mid-drain")
		Expect(c.Stop(victim)).To(Succeed(), "a graceful stop exits 0")
		Expect(c.Restart(ctx(60*time.Second), victim)).To(Succeed())
		m, _ := member(c, via, victimID)
		Expect(m.Draining).To(BeTrue(), "the drain flag survives the restart")

		for _, t := range topics {
			waitReplicaSets(c, t, 3, 3, 120*time.Second, victimID)
		}
		final := waitDecommissioned(c, via, victimID, 120*time.Second)
		drained := time.Now()
		logf("%s drained and removed %s after the decommission:\n%s", victimID, drained.Sub(began).Round(time.Millisecond), harness.FormatMembers(final))
		Expect(harness.AliveVoters(final)).To(Equal(3), "three voters remain")
		Expect(replicasOn(c, via, victimID)).To(BeZero())
		watch.expectOrderly("r15 reassignments")
		expectLeadershipMoved(c, via, led)

		n := load.accepted()
		Eventually(load.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", n+100))
		gap := load.longestGap(began, drained)
		logf("longest time without a 202 during the decommission: %s", gap.Round(time.Millisecond))
		AddReportEntry("r15 longest produce gap", gap.Round(time.Millisecond).String())
		Expect(gap).To(BeNumerically("<", 5*time.Second), "no produce freeze")
		load.finish("R=3 live decommission", c.Endpoints(others...))
	})

	It("(r16) R=3 M=2: producers and consumers run through a scale-out 3 → 4, a decommission, another scale-out and another decommission; every produce is answered 202 (a 503 is retried by the client with the same message), every ISR is full at the end, and no record is lost", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topics, partitions := topicsNamed("r3churn", 2), 3
		for _, t := range topics {
			createR3(c, t, partitions)
		}
		load := startRetryLoad(topics, c.Endpoints(0, 1, 2), 20*time.Millisecond)
		Eventually(load.accepted).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 200))
		watch := startReassignWatch(c, 0)
		began := time.Now()
		base := []string{c.ID(0), c.ID(1), c.ID(2)}

		// 18 replicas: 6/6/6 → 5/5/4/4 (4 moves) → 6/6/6 (4 reassignments), twice.
		for round := range 2 {
			added, err := c.AddNode(ctx(60 * time.Second))
			Expect(err).NotTo(HaveOccurred())
			newID := c.ID(added)
			logf("round %d: %s joined", round+1, newID)
			waitBalanced(c, topics, partitions, append(slices.Clone(base), newID), 4, 5, 120*time.Second)
			Eventually(load.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", load.accepted()+50))

			_, err = c.Client(0).Decommission(ctx(10*time.Second), newID, false)
			Expect(err).NotTo(HaveOccurred())
			for _, t := range topics {
				waitReplicaSets(c, t, partitions, 3, 120*time.Second, newID)
			}
			waitDecommissioned(c, 0, newID, 120*time.Second)
			c.Kill(added) // removed from the cluster: the next node joins without it
			logf("round %d: %s decommissioned", round+1, newID)
			Eventually(load.accepted).WithTimeout(20 * time.Second).Should(BeNumerically(">=", load.accepted()+50))
		}
		waitBalanced(c, topics, partitions, base, 6, 6, 30*time.Second)
		changes := watch.expectOrderly("r16 reassignments")
		Expect(changes).To(BeNumerically(">=", 16), "replica sets changed at least 16 times")
		gap := load.longestGap(began, time.Now())
		logf("%d replica-set changes in %s; longest time without a 202: %s", changes, time.Since(began).Round(time.Millisecond), gap.Round(time.Millisecond))
		AddReportEntry("r16 reassignments", fmt.Sprintf("%d replica-set changes, longest produce gap %s", changes, gap.Round(time.Millisecond)))
		load.finish("R=3 churn", c.Endpoints(0, 1, 2))
	})

	It("(r17) R=3 M=2: the destination of a replica move killed -9 while it catches up: the move never completes without it in the ISR, is given up and the destination dropped once its node is dead (docs/internals/replication.md §9), completes after it restarts, and nothing is lost", func() {
		c := newCluster(3, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
			// The fourth node dies right after the fsync of the first frames it copies as a
			// follower: the destination of a balancing move, killed while it catches up.
			o.NodeEnv = map[int][]string{3: {"NARAD_FAULTS=log.after_fsync=crash@1"}}
		})
		topic, partitions := "r3dest", 6
		createR3(c, topic, partitions)
		h := harness.NewHistory()
		for p := range partitions {
			// Every partition holds records, so no destination is in sync before it copies.
			Expect(produceN(h, c.Endpoint(p%3), topic, fmt.Sprintf("pre-p%d", p), 5, &p)).To(Equal(5))
		}
		stop, pst := producing(h, topic, "r17", c.Endpoints(0, 1, 2))

		added, err := c.AddNode(ctx(60 * time.Second))
		if err != nil { // the move may reach the fault before the harness saw the node ready
			Expect(c.Node(added).Running()).To(BeFalse(), "the fourth node starts: %v", err)
		}
		newID := c.ID(added)
		watch := startReassignWatch(c, 0, newID)
		waitCrashed(c, added, "the destination copied its first frames")
		crashed := time.Now()
		logf("%s (the destination) died while catching up", newID)

		// Given up: the destination leaves every replica set and no move is in flight.
		Eventually(func() error {
			ps, err := replicaSets(c, 0)
			if err != nil {
				return err
			}
			for _, p := range ps {
				if slices.Contains(p.Replicas, newID) {
					return fmt.Errorf("%s still lists %s: replicas %v isr %v", partKey(p), newID, p.Replicas, p.ISR)
				}
			}
			mvs, err := c.Client(0).Moves(ctx(5*time.Second), false)
			if err != nil {
				return err
			}
			if len(mvs) > 0 {
				return fmt.Errorf("%d moves in flight", len(mvs))
			}
			return nil
		}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the move to the dead destination is given up")
		logf("moves to %s given up %s after it died", newID, time.Since(crashed).Round(time.Millisecond))
		Expect(watch.expectOrderly("r17 while the destination is dead")).To(BeZero(), "no move completed")

		c.Opts.NodeEnv = nil
		Expect(c.Restart(ctx(60*time.Second), added)).To(Succeed())
		waitBalanced(c, []string{topic}, partitions, []string{c.ID(0), c.ID(1), c.ID(2), newID}, 4, 5, 120*time.Second)
		logf("balanced onto %s %s after its restart", newID, time.Since(crashed).Round(time.Millisecond))
		waitAccepted(h, topic, len(h.Accepted(topic))+50, 30*time.Second)
		stop()
		logf("producers: %s", pst)
		drain(h, topic, c.Endpoints(0, 1, 2, added))
		r := expectClean("R=3 destination killed mid-move", h)
		logf("duplicates: %d", r.Duplicates)
	})

	It("(r18) R=3 M=2: the leaving source of a live decommission killed -9 mid-reassignment: its leaderships fail over, the destinations catch up from the new leaders, it is dropped everywhere and removed, and nothing is lost", func() {
		c := newCluster(4, func(o *harness.ClusterOptions) {
			o.Args = append(o.Args, "--replica-failover-after="+failoverAfter)
		})
		topic, partitions := "r3source", 6
		createR3(c, topic, partitions)
		victim := decommissionVictim(c)
		victimID := c.ID(victim)
		others := c.Others(victim)
		via := others[0]
		led := ledBy(c, via, victimID)
		logf("decommissioning %s: %d replicas, leads %d partitions", victimID, replicasOn(c, via, victimID), len(led))

		h := harness.NewHistory()
		stop, pst := producing(h, topic, "r18", c.Endpoints(others...))
		watch := startReassignWatch(c, via)
		_, err := c.Client(via).Decommission(ctx(10*time.Second), victimID, false)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			ps, err := replicaSets(c, via)
			return err == nil && slices.ContainsFunc(ps, func(p client.PartitionReplicas) bool {
				return len(p.Replicas) > 3 && slices.Contains(p.Replicas, victimID)
			})
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "a destination joins a partition of %s", victimID)
		still := replicasOn(c, via, victimID)
		Expect(still).To(BeNumerically(">", 0), "the kill happens mid-reassignment")
		before := len(h.Accepted(topic))
		c.Kill(victim)
		logf("killed %s -9 mid-reassignment: still a replica of %d partitions, %d accepted so far", victimID, still, before)

		waitReplicaSets(c, topic, partitions, 3, 120*time.Second, victimID)
		final := waitDecommissioned(c, via, victimID, 120*time.Second)
		logf("after decommission:\n%s", harness.FormatMembers(final))
		watch.expectOrderly("r18 reassignments")
		expectLeadershipMoved(c, via, led)
		waitAccepted(h, topic, before+100, 30*time.Second)
		stop()
		logf("producers: %s", pst)
		drain(h, topic, c.Endpoints(others...))
		r := expectClean("R=3 source killed mid-reassignment", h)
		logf("duplicates: %d", r.Duplicates)
	})
})
