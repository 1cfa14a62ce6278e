package cluster_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// traffic is steady produce and consume on several topics at once, every record in one
// history.
type traffic struct {
	h      *harness.History
	topics []string
	prod   []*harness.TrafficStats
	cons   []*harness.TrafficStats
	stop   func()
}

// startTraffic runs one producer worker (a send every interval, through eps in turn) and one
// consumer worker per topic.
func startTraffic(topics []string, eps []harness.Endpoint, interval time.Duration) *traffic {
	t := &traffic{h: harness.NewHistory(), topics: topics}
	tctx, cancel := context.WithCancel(context.Background())
	var waits []func()
	for _, topic := range topics {
		p, pw := harness.StartClusterProducers(tctx, t.h, harness.ProducerOptions{
			Topic: topic, Prefix: topic, Workers: 1, Endpoints: eps, Interval: interval,
		})
		c, cw := harness.StartClusterConsumers(tctx, t.h, harness.ConsumerOptions{Topic: topic, Workers: 1, Endpoints: eps})
		t.prod, t.cons = append(t.prod, p), append(t.cons, c)
		waits = append(waits, pw, cw)
	}
	stopped := false
	t.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for _, w := range waits {
			w()
		}
	}
	DeferCleanup(t.stop)
	return t
}

// produceErrors is the number of produce calls that did not get a 202.
func (t *traffic) produceErrors() int64 {
	var n int64
	for _, p := range t.prod {
		n += p.Errors()
	}
	return n
}

func (t *traffic) accepted() int {
	n := 0
	for _, topic := range t.topics {
		n += len(t.h.Accepted(topic))
	}
	return n
}

func (t *traffic) String() string {
	var b strings.Builder
	for i, topic := range t.topics {
		fmt.Fprintf(&b, "\n  %s: producers %s | consumers %s", topic, t.prod[i], t.cons[i])
	}
	return b.String()
}

// finish stops the traffic, drains every topic through eps and checks the history: no
// accepted record lost, nothing delivered that was not produced.
func (t *traffic) finish(label string, eps []harness.Endpoint) {
	GinkgoHelper()
	t.stop()
	logf("%s traffic:%s", label, t)
	for _, topic := range t.topics {
		drain(t.h, topic, eps)
	}
	expectClean(label, t.h)
}

// ownerMap describes every topic through node i and returns topic → partition owners.
func ownerMap(c *harness.Cluster, i int, topics []string) map[string][]string {
	GinkgoHelper()
	out := map[string][]string{}
	for _, topic := range topics {
		o, err := harness.WaitAssigned(ctx(20*time.Second), c.Client(i), topic)
		Expect(err).NotTo(HaveOccurred())
		out[topic] = o
	}
	return out
}

// ownedCounts counts partitions per owner.
func ownedCounts(owners map[string][]string) map[string]int {
	n := map[string]int{}
	for _, os := range owners {
		for _, o := range os {
			n[o]++
		}
	}
	return n
}

// changedOwners lists "topic/p: from → to" for every partition whose owner differs.
func changedOwners(before, after map[string][]string) []string {
	var out []string
	for topic, b := range before {
		for p, o := range b {
			if a := after[topic][p]; a != o {
				out = append(out, fmt.Sprintf("%s/%d: %s -> %s", topic, p, o, a))
			}
		}
	}
	sort.Strings(out)
	return out
}

// waitSettled waits until node i reports no move in flight and the owned-partition counts
// equal want, and returns the final owners of topics.
func waitSettled(c *harness.Cluster, i int, topics []string, want map[string]int, within time.Duration) map[string][]string {
	GinkgoHelper()
	var last string
	Eventually(func() bool {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		moves, err := c.Client(i).Moves(rctx, true)
		if err != nil {
			last = err.Error()
			return false
		}
		if len(moves) > 0 {
			var b strings.Builder
			for _, m := range moves {
				fmt.Fprintf(&b, "%s/%d %s->%s %v", m.Topic, m.Partition, m.From, m.To, m.Blocked)
				if m.Detail != nil {
					fmt.Fprintf(&b, " [%s passes=%d copied=%d err=%q]", m.Detail.Phase, m.Detail.Passes, m.Detail.CopiedBytes, m.Detail.LastError)
				}
				b.WriteString("; ")
			}
			last = b.String()
			return false
		}
		l, err := c.Client(i).ClusterMembers(rctx)
		if err != nil {
			last = err.Error()
			return false
		}
		got := map[string]int{}
		for _, m := range l.Members {
			if m.OwnedPartitions > 0 {
				got[m.ID] = m.OwnedPartitions
			}
		}
		last = fmt.Sprintf("owned %v", got)
		for id, n := range want {
			if got[id] != n {
				return false
			}
		}
		return len(got) == len(nonZero(want))
	}).WithTimeout(within).WithPolling(500*time.Millisecond).Should(BeTrue(), func() string {
		return "moves did not settle: " + last + "\n" + c.Tails(15)
	})
	return ownerMap(c, i, topics)
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// histogram is one node's (or several nodes' summed) histogram buckets.
type histogram struct {
	count   float64
	sum     float64
	buckets map[float64]float64 // upper bound → cumulative count
}

// scrapeHistogram sums histogram name over nodes idx.
func scrapeHistogram(c *harness.Cluster, name string, idx ...int) histogram {
	GinkgoHelper()
	h := histogram{buckets: map[float64]float64{}}
	for _, i := range idx {
		e, err := harness.ScrapeMetrics(ctx(5*time.Second), c.URL(i))
		Expect(err).NotTo(HaveOccurred())
		f := e[name]
		if f == nil {
			continue
		}
		for _, s := range f.Samples {
			switch s.Name {
			case name + "_count":
				h.count += s.Value
			case name + "_sum":
				h.sum += s.Value
			case name + "_bucket":
				le := math.Inf(1)
				if v := s.Labels["le"]; v != "+Inf" {
					le, err = strconv.ParseFloat(v, 64)
					Expect(err).NotTo(HaveOccurred())
				}
				h.buckets[le] += s.Value
			}
		}
	}
	return h
}

// quantile is the upper bound of the first bucket holding the q-quantile observation.
func (h histogram) quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h.buckets))
	for b := range h.buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	want := q * h.count
	for _, b := range bounds {
		if h.buckets[b] >= want {
			return b
		}
	}
	return math.Inf(1)
}

func (h histogram) String() string {
	if h.count == 0 {
		return "no observations"
	}
	return fmt.Sprintf("%d observations, mean %.1f ms, p50 ≤ %.0f ms, p99 ≤ %.0f ms", int(h.count),
		1000*h.sum/h.count, 1000*h.quantile(0.5), 1000*h.quantile(0.99))
}

// metricValue scrapes one value from node i (0 when absent).
func metricValue(c *harness.Cluster, i int, name string, labels map[string]string) float64 {
	GinkgoHelper()
	e, err := harness.ScrapeMetrics(ctx(5*time.Second), c.URL(i))
	Expect(err).NotTo(HaveOccurred())
	v, _ := e.Value(name, labels)
	return v
}

// member returns node id's record as node i lists it.
func member(c *harness.Cluster, i int, id string) (client.Member, bool) {
	GinkgoHelper()
	l, err := c.Client(i).ClusterMembers(ctx(5 * time.Second))
	Expect(err).NotTo(HaveOccurred())
	for _, m := range l.Members {
		if m.ID == id {
			return m, true
		}
	}
	return client.Member{}, false
}

// topicsNamed returns n topic names "<prefix>-<i>".
func topicsNamed(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
