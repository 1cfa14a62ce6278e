package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
	"narad.dev/operator/naming"
	"narad.dev/test/harness"
)

// endpoints plays the client Service of a cluster: every 250 ms it lists the cluster's pods and
// keeps an admin client for each that is Ready and not being deleted (the preStop hook's point:
// a terminating pod leaves the Service before SIGTERM).
type endpoints struct {
	nc   *naradv1.NaradCluster
	conn *brokers.Connector

	mu      sync.Mutex
	live    []harness.Endpoint
	clients map[int32]*client.Client
	stop    context.CancelFunc
	done    chan struct{}
}

func startEndpoints(nc *naradv1.NaradCluster) *endpoints {
	ctx, cancel := context.WithCancel(context.Background())
	e := &endpoints{nc: nc, conn: &brokers.Connector{Reader: k8s, Resolver: resolver, Timeout: 5 * time.Second},
		clients: map[int32]*client.Client{}, stop: cancel, done: make(chan struct{})}
	e.refresh(ctx)
	go func() {
		defer close(e.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				e.refresh(ctx)
			}
		}
	}()
	return e
}

func (e *endpoints) Stop() {
	e.stop()
	<-e.done
}

func (e *endpoints) refresh(ctx context.Context) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, ctrlclient.InNamespace(e.nc.Namespace), ctrlclient.MatchingLabels(naming.Selector(e.nc))); err != nil {
		return
	}
	var live []harness.Endpoint
	for i := range pods.Items {
		p := &pods.Items[i]
		o, ok := naming.Ordinal(e.nc, p.Name)
		if !ok || p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		c, err := e.client(ctx, o)
		if err != nil {
			continue
		}
		live = append(live, harness.Endpoint{Node: p.Name, Client: c})
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Node < live[j].Node })
	e.mu.Lock()
	e.live = live
	e.mu.Unlock()
}

// client returns the admin client of ordinal o (the password is read once).
func (e *endpoints) client(ctx context.Context, o int32) (*client.Client, error) {
	e.mu.Lock()
	c, ok := e.clients[o]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := e.conn.Pod(ctx, e.nc, o)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.clients[o] = c
	e.mu.Unlock()
	return c, nil
}

// pick returns the n-th live endpoint (round robin), false when none is live.
func (e *endpoints) pick(n int) (harness.Endpoint, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.live) == 0 {
		return harness.Endpoint{}, false
	}
	return e.live[n%len(e.live)], true
}

// Live lists the node IDs currently behind the "Service".
func (e *endpoints) Live() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, len(e.live))
	for i, l := range e.live {
		out[i] = l.Node
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// traffic is continuous produce and consume+ack on some topics through the live endpoints.
// Every produce attempt and every delivery goes into a History: the ids that got a 202 are the
// ground truth, every one must be consumed at least once.
type traffic struct {
	eps     *endpoints
	history *harness.History // produce attempts and deliveries of the produced topics
	// children records deliveries of fan-out children (same payloads as their parent).
	children *harness.History

	produced, consumed, failed atomic.Int64
	lastErr                    atomic.Value // string

	stopProduce, stopConsume context.CancelFunc
	producers, consumers     sync.WaitGroup
}

// startTraffic runs, per topic, one keyed and one keyless producer and two consumers, and one
// consumer per child topic (recorded apart).
func startTraffic(eps *endpoints, topics, childTopics []string) *traffic {
	t := &traffic{eps: eps, history: harness.NewHistory(), children: harness.NewHistory()}
	pctx, pcancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	t.stopProduce, t.stopConsume = pcancel, ccancel
	for ti, topic := range topics {
		for w, keyed := range []bool{true, false} {
			t.producers.Add(1)
			go t.produce(pctx, topic, fmt.Sprintf("t%d-w%d", ti, w), keyed)
		}
		for w := range 2 {
			t.consumers.Add(1)
			go t.consume(cctx, topic, t.history, w)
		}
	}
	for _, child := range childTopics {
		t.consumers.Add(1)
		go t.consume(cctx, child, t.children, 0)
	}
	return t
}

func (t *traffic) noteErr(err error) {
	t.failed.Add(1)
	t.lastErr.Store(err.Error())
}

func (t *traffic) produce(ctx context.Context, topic, prefix string, keyed bool) {
	defer t.producers.Done()
	for seq := 0; ctx.Err() == nil; seq++ {
		ep, ok := t.eps.pick(seq)
		if !ok {
			pause(ctx, 100*time.Millisecond)
			continue
		}
		id := fmt.Sprintf("%s-%s-%06d", topic, prefix, seq)
		opts := client.ProduceOptions{}
		if keyed {
			opts.Key = fmt.Sprintf("k%02d", seq%23)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ep.Client.Produce(rctx, topic, []byte(id), opts)
		cancel()
		t.history.Produce(topic, ep.Node, id, err)
		if err != nil {
			t.noteErr(fmt.Errorf("produce %s via %s: %w", id, ep.Node, err))
			pause(ctx, 100*time.Millisecond)
			continue
		}
		t.produced.Add(1)
		pause(ctx, 40*time.Millisecond)
	}
}

func (t *traffic) consume(ctx context.Context, topic string, h *harness.History, w int) {
	defer t.consumers.Done()
	for call := w; ctx.Err() == nil; call++ {
		ep, ok := t.eps.pick(call)
		if !ok {
			pause(ctx, 100*time.Millisecond)
			continue
		}
		n, err := consumeAndAck(ctx, ep, topic, h)
		t.consumed.Add(int64(n))
		if err != nil {
			t.noteErr(fmt.Errorf("consume %s via %s: %w", topic, ep.Node, err))
			pause(ctx, 200*time.Millisecond)
		}
	}
}

// consumeAndAck long-polls one batch, records it and acks it (an unacked message comes back
// after the visibility timeout, which is fine: delivery is at least once).
func consumeAndAck(ctx context.Context, ep harness.Endpoint, topic string, h *harness.History) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	msgs, err := ep.Client.Consume(rctx, topic, client.ConsumeOptions{Wait: time.Second, Max: 100})
	if err != nil {
		return 0, err
	}
	ds, err := harness.ToDeliveries(msgs)
	h.Deliver(topic, ep.Node, ds, false)
	if err != nil || len(ds) == 0 {
		return len(ds), err
	}
	entries := make([]client.AckEntry, len(ds))
	for i, d := range ds {
		entries[i] = client.AckEntry{ReceiptHandle: d.Handle}
	}
	if _, err := ep.Client.AckBatch(rctx, topic, entries); err != nil {
		return len(ds), fmt.Errorf("ack: %w", err)
	}
	return len(ds), nil
}

// StopProducing stops the producers and waits for their last calls.
func (t *traffic) StopProducing() {
	t.stopProduce()
	t.producers.Wait()
}

// StopConsuming stops the consumers and waits for them.
func (t *traffic) StopConsuming() {
	t.stopConsume()
	t.consumers.Wait()
}

// missingInChild returns the ids of parent that got a 202 but were never delivered from child.
func (t *traffic) missingInChild(parent string) []string {
	got := map[string]bool{}
	for _, d := range t.children.Deliveries() {
		got[d.ID] = true
	}
	var out []string
	for id := range t.history.Accepted(parent) {
		if !got[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (t *traffic) String() string {
	last, _ := t.lastErr.Load().(string)
	return fmt.Sprintf("%d produced (202), %d consumed, %d failed calls; last error: %s",
		t.produced.Load(), t.consumed.Load(), t.failed.Load(), last)
}

func pause(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// preload writes about mb MiB to topic in 1 MiB batches of 32 KiB records with distinct keys,
// so every partition gets its share.
func preload(ctx context.Context, c *client.Client, topic string, mb int) error {
	body := make([]byte, 32*1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for i := range mb {
		recs := make([]client.BatchRecord, 32)
		for j := range recs {
			recs[j] = client.NewBatchRecord(fmt.Sprintf("bulk-%d-%d", i, j), body)
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := c.ProduceBatch(rctx, topic, recs)
		cancel()
		if err != nil {
			return fmt.Errorf("preload batch %d of %s: %w", i, topic, err)
		}
	}
	return nil
}
