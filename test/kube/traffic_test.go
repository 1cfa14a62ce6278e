package kube

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/test/harness"
)

// load is producer traffic to one topic through the client Service, recorded in a history.
type load struct {
	topic   string
	history *harness.History
	stats   *harness.TrafficStats
	cancel  context.CancelFunc
	wait    func()
}

// newLoad starts the producers opts describes, through the client Service.
func newLoad(ctx context.Context, opts harness.ProducerOptions) *load {
	h := harness.NewHistory()
	lctx, cancel := context.WithCancel(ctx)
	opts.Endpoints = []harness.Endpoint{svc}
	stats, wait := harness.StartClusterProducers(lctx, h, opts)
	l := &load{topic: opts.Topic, history: h, stats: stats, cancel: cancel, wait: wait}
	DeferCleanup(l.stop)
	return l
}

// startLoad runs two producers to topic through the client Service, one message per worker
// every 20 ms, until stop; payloads start with prefix. It returns once 50 messages got a 202.
func startLoad(ctx context.Context, topic, prefix string) *load {
	GinkgoHelper()
	l := newLoad(ctx, harness.ProducerOptions{Topic: topic, Prefix: prefix, Workers: 2, Interval: 20 * time.Millisecond})
	l.waitAccepted(ctx, 50)
	return l
}

// accepted is how many distinct messages got a 202 so far.
func (l *load) accepted() int { return len(l.history.Accepted(l.topic)) }

// waitAccepted waits until n more messages than now got a 202: traffic is being accepted.
func (l *load) waitAccepted(ctx context.Context, n int) {
	GinkgoHelper()
	before := l.accepted()
	Eventually(ctx, l.accepted).WithTimeout(2*time.Minute).Should(BeNumerically(">=", before+n), l.stats.String())
}

// stop ends the producers and waits for them; a second call does nothing.
func (l *load) stop() {
	l.cancel()
	l.wait()
}

// accountFor stops the producers and accounts for every message that got a 202: consumed
// (and acked) from topic through the client Service, where topic is l's own topic or a
// fan-out child of it. Lost must be none; duplicate deliveries (at-least-once) are counted
// and reported with the rest of the history's check.
func (l *load) accountFor(ctx context.Context, topic string) harness.Report {
	GinkgoHelper()
	l.stop()
	AddReportEntry("producers to "+l.topic, l.stats.String())
	h := l.history
	if topic != l.topic {
		// The child's deliveries go to a history of their own, holding the parent's 202s as
		// the child's: a parent message must arrive in the child, whatever the parent's
		// consumers did with it.
		h = harness.NewHistory()
		for id := range l.history.Accepted(l.topic) {
			h.RecordProduce(harness.ProduceRecord{ID: id, Topic: topic, Node: "fanout", Outcome: harness.OutcomeAccepted})
		}
	}
	eps := []harness.Endpoint{svc}
	// A fan-out copies asynchronously: drain until every accepted message arrived.
	// Each attempt is bounded: DrainAccepted returns only when nothing is missing.
	Eventually(ctx, func(g Gomega) {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		g.Expect(harness.DrainAccepted(dctx, h, topic, eps, 2*time.Second)).To(Succeed())
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	r := h.Check()
	AddReportEntry("accounting of "+topic, r.String())
	if r.Duplicates > 0 {
		AddReportEntry("messages of "+topic+" delivered more than once, by partition", duplicatesByPartition(h, r))
	}
	Expect(r.Accepted).To(BeNumerically(">", 0), "no message got a 202")
	Expect(r.Missing).To(BeEmpty(), "accepted with a 202 and never consumed from %s", topic)
	Expect(r.Conflicts).To(BeEmpty(), "one log position carrying two messages in %s", topic)
	return r
}

// duplicatesByPartition counts the messages delivered more than once per "topic/partition":
// where redeliveries cluster says more than their total.
func duplicatesByPartition(h *harness.History, r harness.Report) map[string]int {
	out := map[string]int{}
	seen := map[string]bool{}
	for _, d := range h.Deliveries() {
		if r.DuplicateIDs[d.ID] == 0 || seen[d.ID] {
			continue
		}
		seen[d.ID] = true
		out[fmt.Sprintf("%s/%d", d.Topic, d.Partition)]++
	}
	return out
}
