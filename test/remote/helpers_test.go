package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// createTopic creates req through node i of c (retrying 503s) and waits until every live node
// describes it with every partition assigned; it returns the partition owners.
func createTopic(c *harness.Cluster, i int, req client.CreateTopicRequest) []string {
	GinkgoHelper()
	_, err := harness.CreateTopicRetry(ctx(30*time.Second), c.Client(i), req)
	Expect(err).NotTo(HaveOccurred(), "create %s through %s", req.Name, c.ID(i))
	var owners []string
	for _, j := range c.Live() {
		o, err := harness.WaitAssigned(ctx(20*time.Second), c.Client(j), req.Name)
		Expect(err).NotTo(HaveOccurred(), "%s describes %s", c.ID(j), req.Name)
		owners = o
	}
	return owners
}

// deleteTopic deletes name through node i of c and waits until no live node describes it.
func deleteTopic(c *harness.Cluster, i int, name string) {
	GinkgoHelper()
	Expect(c.Client(i).DeleteTopic(ctx(20*time.Second), name)).To(Succeed(), "delete %s", name)
	for _, j := range c.Live() {
		Eventually(func() bool {
			_, err := c.Client(j).GetTopic(ctx(5*time.Second), name, nil)
			return client.IsStatus(err, http.StatusNotFound)
		}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "%s still describes %s", c.ID(j), name)
	}
}

// targetURL is the url field of a remote body naming every target node (failover order).
func (p *pair) targetURL() string {
	urls := make([]string, p.dst.Size())
	for i := range urls {
		urls[i] = p.dst.URL(i)
	}
	return strings.Join(urls, ",")
}

// remote is the remote body of an attach into target topic with the link user.
func (p *pair) remote(topic, password string) client.RemoteChild {
	return client.RemoteChild{URL: p.targetURL(), Topic: topic, User: linkUser, Password: password}
}

// attach attaches a remote child of parent through source node i (retrying 503s: an owner
// not askable yet) and returns its listing entry.
func (p *pair) attach(i int, parent string, r client.RemoteChild, start string) *client.ChildLink {
	GinkgoHelper()
	var l *client.ChildLink
	Eventually(func() error {
		var err error
		l, err = p.src.Client(i).AttachRemote(ctx(15*time.Second), parent, r, 0, start)
		if err != nil && !client.IsStatus(err, http.StatusServiceUnavailable) {
			return StopTrying(fmt.Sprintf("attach remote %s to %s", r.Topic, parent)).Wrap(err)
		}
		return err
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	logf("attached %s (id %s, start %s) to %s: state %s", l.Name, l.ID, l.Start, parent, l.State)
	return l
}

// attachRaw posts a remote attach body through source node i without the client, so the
// answer's "reason" field can be read; it returns the status and the decoded body.
func (p *pair) attachRaw(i int, parent string, r client.RemoteChild, start string) (int, map[string]any) {
	GinkgoHelper()
	body, err := json.Marshal(map[string]any{"remote": r, "start": start})
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx(15*time.Second), http.MethodPost,
		p.src.URL(i)+"/v1/topics/"+parent+"/children", bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	var out map[string]any
	Expect(json.Unmarshal(b, &out)).To(Succeed(), "answer %d %q", resp.StatusCode, b)
	return resp.StatusCode, out
}

// listing returns the raw children listing of parent through the first live source node.
func (p *pair) listing(parent string) ([]byte, *client.ChildList, error) {
	live := p.src.Live()
	if len(live) == 0 {
		return nil, nil, fmt.Errorf("no live source node")
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.src.Client(live[0]).Children(rctx, parent)
	if err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(l)
	return raw, l, err
}

// link returns parent's remote link id from the listing (nil when it is not listed).
func (p *pair) link(parent, id string) (*client.ChildLink, error) {
	_, l, err := p.listing(parent)
	if err != nil {
		return nil, err
	}
	for i := range l.Children {
		if l.Children[i].ID == id {
			return &l.Children[i], nil
		}
	}
	return nil, nil
}

// recoveryPoint decodes a remote link's recovery point (partition → first unsent offset).
func recoveryPoint(l *client.ChildLink) map[int]int64 {
	GinkgoHelper()
	var m map[string]int64
	if len(l.RecoveryPoint) > 0 {
		Expect(json.Unmarshal(l.RecoveryPoint, &m)).To(Succeed(), "recovery_point %s", l.RecoveryPoint)
	}
	out := make(map[int]int64, len(m))
	for k, v := range m {
		var p int
		_, err := fmt.Sscan(k, &p)
		Expect(err).NotTo(HaveOccurred(), "recovery_point key %q", k)
		out[p] = v
	}
	return out
}

func describeLink(l *client.ChildLink) string {
	if l == nil {
		return "<not listed>"
	}
	return fmt.Sprintf("state %s, lag %d (complete %v), recovery_point %s, last_error %q",
		l.State, l.LagMessages, l.LagComplete, l.RecoveryPoint, l.LastError)
}

// waitLink polls the listing every 100 ms until cond holds for link id of parent, logging
// every state change, and returns the entry that satisfied it.
func (p *pair) waitLink(parent, id, what string, within time.Duration, cond func(*client.ChildLink) bool) *client.ChildLink {
	GinkgoHelper()
	var last *client.ChildLink
	var lastErr error
	lastState := ""
	began := time.Now()
	ok := false
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		l, err := p.link(parent, id)
		lastErr = err
		if err == nil {
			last = l
			st := "<not listed>"
			if l != nil {
				st = l.State
			}
			if st != lastState {
				logf("link %s: %s", id, describeLink(l))
				lastState = st
			}
			if l != nil && cond(l) {
				ok = true
				break
			}
		}
		<-time.After(100 * time.Millisecond) // polling interval of a bounded wait
	}
	Expect(ok).To(BeTrue(), "waiting %s for link %s to be %s; last seen: %s (last listing error %v)",
		within, id, what, describeLink(last), lastErr)
	logf("link %s %s after %s", id, what, time.Since(began).Round(time.Millisecond))
	return last
}

// holdState samples link id of parent every 100 ms until deadline and returns a line for
// every sample whose state is not want (the caller collects them: a wrong state is a finding,
// and the scenario goes on so the final check still runs).
func (p *pair) holdState(parent, id, want string, deadline time.Time) []string {
	var bad []string
	samples := 0
	for time.Now().Before(deadline) {
		l, err := p.link(parent, id)
		if err == nil && l != nil {
			samples++
			if l.State != want {
				bad = append(bad, fmt.Sprintf("%s: want %s, listed %s", time.Now().Format("15:04:05.000"), want, describeLink(l)))
			}
		}
		<-time.After(100 * time.Millisecond) // sampling interval of a bounded observation
	}
	logf("link %s: %d samples while %s expected, %d showed another state", id, samples, want, len(bad))
	return bad
}

// inState is a waitLink condition: the listed state is s.
func inState(s string) func(*client.ChildLink) bool {
	return func(l *client.ChildLink) bool { return l.State == s }
}

// caughtUp is a waitLink condition: active, every partition reported, and each partition's
// recovery point at its committed high watermark (nothing left to send).
func caughtUp(l *client.ChildLink) bool {
	if l.State != "active" || !l.LagComplete || l.LagMessages != 0 || len(l.Cursors) == 0 {
		return false
	}
	for _, c := range l.Cursors {
		if c.NextOffset != c.HighWatermark {
			return false
		}
	}
	return true
}

// stored is one record read back from a topic, in log order.
type stored struct {
	payload   string
	key       string
	partition int
	offset    int64
}

// readAll reads every committed record of topic through c with replay reads (read-only, in
// offset order per partition), partition by partition up to the high watermark described at
// the start.
func readAll(c *client.Client, topic string) [][]stored {
	GinkgoHelper()
	out, err := tryReadAll(c, topic)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// errPartitionUnavailable is tryReadAll's answer for a partition its topic describes as not
// available (no live owner yet): as retryable as a 503.
var errPartitionUnavailable = errors.New("partition not available")

// tryReadAll is readAll answering the first failed request as an error instead of failing
// the spec, so that a caller may retry what the API documents as retryable.
func tryReadAll(c *client.Client, topic string) ([][]stored, error) {
	d, err := c.GetTopic(ctx(10*time.Second), topic, nil)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", topic, err)
	}
	out := make([][]stored, d.Partitions)
	for _, s := range d.PartitionStats {
		if !s.Available {
			return nil, fmt.Errorf("%s/%d: %w", topic, s.Index, errPartitionUnavailable)
		}
		p := s.Index
		next := int64(0)
		for next < s.HighWatermark {
			off := next
			msgs, err := c.Consume(ctx(15*time.Second), topic, client.ConsumeOptions{Partition: &p, Offset: &off,
				Max: client.MaxConsumeMessages})
			if err != nil {
				return nil, fmt.Errorf("replay %s/%d@%d: %w", topic, p, off, err)
			}
			if len(msgs) == 0 {
				return nil, fmt.Errorf("replay %s/%d@%d below its high watermark %d answered nothing", topic, p, off, s.HighWatermark)
			}
			for _, m := range msgs {
				b, err := m.Bytes()
				if err != nil {
					return nil, fmt.Errorf("replay %s/%d@%d: payload: %w", topic, p, m.Offset, err)
				}
				if m.Offset < next {
					return nil, fmt.Errorf("replay %s/%d went back from %d to %d", topic, p, next, m.Offset)
				}
				out[p] = append(out[p], stored{payload: string(b), key: m.Key, partition: p, offset: m.Offset})
				next = m.Offset + 1
			}
		}
	}
	return out, nil
}

// readUntil reads topic in full (tryReadAll) until it holds every payload of want, at most within
// (a 202 means durably accepted by the receiving node; the record becomes readable once that
// node's dispatcher committed it at the partition owner, which a partition move can delay).
// A read the API answers as retryable (a 503 while a cluster settles after a freeze, say) is
// read again within the same bound; any other failure fails the spec.
// It returns the last read, complete or not: the history check names what is missing.
func readUntil(c *client.Client, topic string, want map[string]bool, within time.Duration) []stored {
	GinkgoHelper()
	began := time.Now()
	for {
		all, err := tryReadAll(c, topic)
		if err != nil {
			var ce *client.Error
			retry := errors.As(err, &ce) && ce.Retryable() || errors.Is(err, errPartitionUnavailable)
			Expect(retry && time.Since(began) <= within).To(BeTrue(), "reading %s: %v", topic, err)
			logf("read %s: %v; reading again", topic, err)
			<-time.After(200 * time.Millisecond) // polling interval of a bounded wait
			continue
		}
		recs := flatten(all)
		have := make(map[string]bool, len(recs))
		for _, r := range recs {
			have[r.payload] = true
		}
		missing := 0
		for id := range want {
			if !have[id] {
				missing++
			}
		}
		if missing == 0 || time.Since(began) > within {
			logf("read %s: %d records, %d of %d wanted payloads missing, after %s", topic, len(recs), missing, len(want),
				time.Since(began).Round(time.Millisecond))
			return recs
		}
		<-time.After(200 * time.Millisecond) // polling interval of a bounded wait
	}
}

// payloads returns the set of payloads of recs, less those in except.
func payloads(recs []stored, except ...[]stored) map[string]bool {
	out := make(map[string]bool, len(recs))
	for _, r := range recs {
		out[r.payload] = true
	}
	for _, e := range except {
		for _, r := range e {
			delete(out, r.payload)
		}
	}
	return out
}

// flatten returns every record of a readAll result.
func flatten(parts [][]stored) []stored {
	var out []stored
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// recordTarget notes every record read from one incarnation of the target topic as a replay
// delivery in h, under label (positions of two incarnations must not be compared).
func recordTarget(h *harness.History, label string, recs []stored) {
	ds := make([]harness.Delivery, len(recs))
	for i, r := range recs {
		ds[i] = harness.Delivery{Payload: r.payload, Key: r.key, Partition: r.partition, Offset: r.offset}
	}
	h.Deliver(label, "target", ds, true)
}

// producers writes keyed and keyless records into a parent until stopped. Keyed worker w owns
// the keys "k<w>.<j>" (j < keysPerWorker) and sends them in turn, one call at a time, so a key
// never has two records in flight. Every attempt is recorded in h under the history's topic.
type producers struct {
	h      *harness.History
	htopic string
	mu     sync.Mutex
	keyOf  map[string]string // payload → key ("" keyless)
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

const keysPerWorker = 4

func newProducers(h *harness.History, htopic string) *producers {
	return &producers{h: h, htopic: htopic, keyOf: map[string]string{}}
}

// start runs keyed and keyless workers against parent through eps (worker w's call n goes to
// eps[(w+n) % len]), interval apart per worker; a failed call waits 100 ms more.
func (pr *producers) start(eps []harness.Endpoint, parent, prefix string, keyed, keyless int, interval time.Duration) {
	pctx, cancel := context.WithCancel(context.Background())
	pr.stop = cancel
	for w := range keyed + keyless {
		pr.wg.Add(1)
		go func() {
			defer pr.wg.Done()
			for n := 0; pctx.Err() == nil; n++ {
				key := ""
				id := fmt.Sprintf("%s-n%d-%06d", prefix, w, n)
				if w < keyed {
					key = fmt.Sprintf("k%d.%d", w, n%keysPerWorker)
					id = fmt.Sprintf("%s-%s-%06d", prefix, key, n)
				}
				ep := eps[(w+n)%len(eps)]
				pr.mu.Lock()
				pr.keyOf[id] = key
				pr.mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := ep.Client.Produce(rctx, parent, []byte(id), client.ProduceOptions{Key: key})
				rcancel()
				pr.h.Produce(pr.htopic, ep.Node, id, err)
				pause := interval
				if err != nil {
					pause += 100 * time.Millisecond
				}
				select {
				case <-pctx.Done():
				case <-time.After(pause): // the producers' pace, not a synchronisation
				}
			}
		}()
	}
}

// halt stops the workers and waits until every call in flight has ended.
func (pr *producers) halt() {
	if pr.stop != nil {
		pr.stop()
	}
	pr.wg.Wait()
}

// key returns the key a payload was sent with and whether this producer sent it.
func (pr *producers) key(id string) (string, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	k, ok := pr.keyOf[id]
	return k, ok
}

// waitAccepted waits until h holds at least n accepted payloads of topic.
func waitAccepted(h *harness.History, topic string, n int, within time.Duration) {
	GinkgoHelper()
	Eventually(func() int { return len(h.Accepted(topic)) }).WithTimeout(within).WithPolling(20*time.Millisecond).
		Should(BeNumerically(">=", n), "producers made no progress")
}
