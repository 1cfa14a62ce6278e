package e2e_test

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// produceTo sends payloads to one partition (in order, so offsets follow the list) and
// waits until they are visible.
func produceTo(topic string, partition int, payloads ...string) {
	GinkgoHelper()
	before, err := harness.HighWatermarks(ctx(5*time.Second), api, topic)
	Expect(err).NotTo(HaveOccurred())
	for _, p := range payloads {
		Expect(api.Produce(ctx(5*time.Second), topic, []byte(p), client.ProduceOptions{Partition: intp(partition)})).To(Succeed())
	}
	waitVisible(topic, harness.Sum(before)+int64(len(payloads)))
}

var _ = Describe("Queue consume", func() {
	It("never redelivers an acked message, even after its visibility timeout", func() {
		name := uniqueTopic("ack")
		createTopic(client.CreateTopicRequest{Name: name, VisibilityTimeoutMs: 1000})
		produceTo(name, 0, "only")
		m := consumeOne(name, time.Second)
		Expect(m.ReceiptHandle).NotTo(BeEmpty(), "queue consumes carry a receipt handle")
		Expect(m.Bytes()).To(Equal([]byte("only")))
		r := raw(http.MethodPost, "/v1/topics/"+name+"/ack?receipt_handle="+m.ReceiptHandle, nil)
		Expect(r.Status).To(Equal(http.StatusNoContent))
		Expect(r.Body).To(BeEmpty())
		// 2.5 s covers the 1 s lease plus the 1 s expiry purger: an unacked message
		// would be back by then.
		expectNothing(name, 2500*time.Millisecond)
		Expect(statusOf(api.Ack(ctx(5*time.Second), name, m.ReceiptHandle))).To(Equal(http.StatusGone), "a second ack of a settled message is 410")
	})

	It("hands each message to one consumer at a time and answers 204 when nothing is reservable", func() {
		name := uniqueTopic("single-holder")
		createTopic(client.CreateTopicRequest{Name: name})
		produceTo(name, 1, "a", "b")
		m1 := consumeOne(name, time.Second)
		m2 := consumeOne(name, time.Second)
		Expect(m1.Offset).NotTo(Equal(m2.Offset))
		r := raw(http.MethodGet, "/v1/topics/"+name+"/consume", nil)
		Expect(r.Status).To(Equal(http.StatusNoContent), "both messages are leased: nothing left")
		Expect(r.Body).To(BeEmpty())
	})

	It("replays a record by partition and offset with its exact bytes, without touching queue state", func() {
		name := uniqueTopic("replay")
		createTopic(client.CreateTopicRequest{Name: name})
		produceTo(name, 1, "r0", `{"r": 1}`, "r2")

		for i, want := range []string{"r0", `{"r": 1}`, "r2"} {
			m := replay(name, 1, int64(i))
			Expect(m.Partition).To(Equal(1))
			Expect(m.Offset).To(Equal(int64(i)))
			Expect(m.ReceiptHandle).To(BeEmpty())
			Expect(m.Bytes()).To(Equal([]byte(want)))
		}
		msgs, err := api.Consume(ctx(5*time.Second), name, client.ConsumeOptions{Partition: intp(1), Offset: i64p(1), Max: 5})
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).To(HaveLen(2), "replay with max_messages returns consecutive records up to the high watermark")
		Expect(msgs[0].Offset).To(Equal(int64(1)))
		Expect(msgs[1].Offset).To(Equal(int64(2)))

		msgs, err = api.Consume(ctx(5*time.Second), name, client.ConsumeOptions{Partition: intp(1), Offset: i64p(3), Wait: 3 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).To(BeEmpty(), "an offset at the high watermark answers 204")

		// The queue still starts at offset 0: the replays reserved nothing.
		q := consumeOne(name, time.Second)
		Expect(q.Partition).To(Equal(1))
		Expect(q.Offset).To(Equal(int64(0)))
		// Replaying a leased record neither steals nor ends its lease.
		Expect(replay(name, 1, 0).Bytes()).To(Equal([]byte("r0")))
		Expect(api.Ack(ctx(5*time.Second), name, q.ReceiptHandle)).To(Succeed())
		// And an acked record stays replayable.
		Expect(replay(name, 1, 0).Bytes()).To(Equal([]byte("r0")))
		q = consumeOne(name, time.Second)
		Expect(q.Offset).To(Equal(int64(1)))
	})

	It("hands out up to max_messages messages, each with its own lease, and settles them with ack/batch", func() {
		name := uniqueTopic("many")
		createTopic(client.CreateTopicRequest{Name: name})
		payloads, err := harness.ProduceBatches(ctx(10*time.Second), api, name, "m", 25, 25)
		Expect(err).NotTo(HaveOccurred())
		waitVisible(name, 25)

		var got []client.Message
		for tries := 0; len(got) < 25 && tries < 20; tries++ {
			msgs, err := api.Consume(ctx(10*time.Second), name, client.ConsumeOptions{Max: 10, Wait: time.Second})
			Expect(err).NotTo(HaveOccurred())
			Expect(len(msgs)).To(BeNumerically("<=", 10), "never more than max_messages")
			got = append(got, msgs...)
		}
		Expect(got).To(HaveLen(25))
		handles := map[string]bool{}
		bodies := map[string]bool{}
		var entries []client.AckEntry
		for _, m := range got {
			Expect(handles).NotTo(HaveKey(m.ReceiptHandle), "each message has its own handle")
			handles[m.ReceiptHandle] = true
			b, err := m.Bytes()
			Expect(err).NotTo(HaveOccurred())
			bodies[string(b)] = true
			entries = append(entries, client.AckEntry{ReceiptHandle: m.ReceiptHandle})
		}
		for _, p := range payloads {
			Expect(bodies).To(HaveKey(p))
		}
		// Mixed batch: a malformed handle fails alone, the rest succeed, order is kept.
		mixed := append([]client.AckEntry{{ReceiptHandle: "not-a-handle"}}, entries...)
		res, err := api.AckBatch(ctx(10*time.Second), name, mixed)
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(HaveLen(26))
		Expect(res[0].Status).To(Equal(http.StatusBadRequest))
		for i, r := range res[1:] {
			Expect(r.Status).To(Equal(http.StatusNoContent), "entry %d: %s", i+1, r.Error)
		}
		res, err = api.AckBatch(ctx(10*time.Second), name, entries)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range res {
			Expect(r.Status).To(Equal(http.StatusGone), "acking settled messages again is 410 per entry")
		}
		expectNothing(name, 300*time.Millisecond)
	})

	It("keeps the lease while the holder extends it, past several visibility timeouts", func() {
		name := uniqueTopic("extend")
		createTopic(client.CreateTopicRequest{Name: name, VisibilityTimeoutMs: 1000})
		produceTo(name, 0, "held")
		m := consumeOne(name, time.Second)
		// Six rounds of (wait 500 ms for a redelivery that must not come, then extend):
		// 3 s in all, three times the visibility timeout.
		for round := 0; round < 6; round++ {
			expectNothing(name, 500*time.Millisecond)
			Expect(api.Extend(ctx(5*time.Second), name, m.ReceiptHandle)).To(Succeed(), "round %d", round)
		}
		Expect(api.Ack(ctx(5*time.Second), name, m.ReceiptHandle)).To(Succeed(), "the extended handle is still valid for the ack")
		expectNothing(name, 1500*time.Millisecond)
	})

	It("makes a nacked message deliverable at once, waking a parked consumer, and kills the handle", func() {
		name := uniqueTopic("nack")
		createTopic(client.CreateTopicRequest{Name: name})
		produceTo(name, 2, "again")
		m := consumeOne(name, time.Second)

		type result struct {
			msgs []client.Message
			err  error
			at   time.Time
		}
		waiter := make(chan result, 1)
		go func() {
			defer GinkgoRecover()
			msgs, err := api.Consume(ctx(20*time.Second), name, client.ConsumeOptions{Wait: 10 * time.Second})
			waiter <- result{msgs, err, time.Now()}
		}()
		Consistently(waiter).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "nothing is reservable before the nack")
		nackAt := time.Now()
		Expect(api.Nack(ctx(5*time.Second), name, m.ReceiptHandle)).To(Succeed())
		var r result
		Eventually(waiter).WithTimeout(12 * time.Second).Should(Receive(&r))
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.msgs).To(HaveLen(1))
		Expect(r.msgs[0].Offset).To(Equal(m.Offset))
		Expect(r.msgs[0].ReceiptHandle).NotTo(Equal(m.ReceiptHandle))
		Expect(r.at.Sub(nackAt)).To(BeNumerically("<", 2*time.Second), "the nack wakes the waiter immediately")
		Expect(statusOf(api.Ack(ctx(5*time.Second), name, m.ReceiptHandle))).To(Equal(http.StatusGone))
		Expect(api.Ack(ctx(5*time.Second), name, r.msgs[0].ReceiptHandle)).To(Succeed())
	})

	It("redelivers a message whose visibility timeout lapsed, and the late holder's ack gets 410", func() {
		name := uniqueTopic("expiry")
		createTopic(client.CreateTopicRequest{Name: name, VisibilityTimeoutMs: 1000})
		produceTo(name, 0, "slow")
		first := consumeOne(name, time.Second)
		reservedAt := time.Now()
		second := consumeOne(name, 8*time.Second)
		Expect(time.Since(reservedAt)).To(BeNumerically(">=", 900*time.Millisecond), "not before the lease lapsed")
		Expect(second.Offset).To(Equal(first.Offset))
		Expect(second.Partition).To(Equal(first.Partition))
		Expect(second.ReceiptHandle).NotTo(Equal(first.ReceiptHandle), "a re-reservation gets a new handle")
		Expect(statusOf(api.Ack(ctx(5*time.Second), name, first.ReceiptHandle))).To(Equal(http.StatusGone))
		Expect(statusOf(api.Extend(ctx(5*time.Second), name, first.ReceiptHandle))).To(Equal(http.StatusGone))
		Expect(api.Ack(ctx(5*time.Second), name, second.ReceiptHandle)).To(Succeed(), "the new holder's ack works")
	})

	It("wakes a long poll as soon as a message is produced", func() {
		name := uniqueTopic("longpoll")
		createTopic(client.CreateTopicRequest{Name: name})
		type result struct {
			msgs []client.Message
			err  error
			at   time.Time
		}
		start := time.Now()
		done := make(chan result, 1)
		go func() {
			defer GinkgoRecover()
			msgs, err := api.Consume(ctx(25*time.Second), name, client.ConsumeOptions{Wait: 10 * time.Second})
			done <- result{msgs, err, time.Now()}
		}()
		Consistently(done).WithTimeout(400*time.Millisecond).ShouldNot(Receive(), "an empty topic parks the poll")
		producedAt := time.Now()
		Expect(api.Produce(ctx(5*time.Second), name, []byte("wake"), client.ProduceOptions{})).To(Succeed())
		var r result
		Eventually(done).WithTimeout(12 * time.Second).Should(Receive(&r))
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.msgs).To(HaveLen(1), "the poll returns the message, not 204")
		Expect(r.msgs[0].Bytes()).To(Equal([]byte("wake")))
		Expect(r.at.Sub(start)).To(BeNumerically("<", 5*time.Second), "returned well before the 10 s wait")
		GinkgoWriter.Printf("long poll returned %s after the produce\n", r.at.Sub(producedAt))
	})

	It("treats a negative wait as 0 and lets the first of repeated ack parameters win", func() {
		name := uniqueTopic("params")
		createTopic(client.CreateTopicRequest{Name: name, VisibilityTimeoutMs: 1500})
		start := time.Now()
		r := raw(http.MethodGet, "/v1/topics/"+name+"/consume?wait=-5s", nil)
		Expect(r.Status).To(Equal(http.StatusNoContent))
		Expect(time.Since(start)).To(BeNumerically("<", time.Second), "a negative wait answers at once")

		produceTo(name, 0, "p0")
		m := consumeOne(name, time.Second)
		// extend=1 extends (the lease survives two visibility timeouts of waiting). Each extend
		// comes 800 ms after the last: 700 ms of margin before the lease would lapse, for a
		// loaded machine.
		for round := 0; round < 4; round++ {
			r = raw(http.MethodPost, "/v1/topics/"+name+"/ack?extend=1&extend=0&receipt_handle="+m.ReceiptHandle, nil)
			Expect(r.Status).To(Equal(http.StatusNoContent), "extend=1 then extend=0: the first wins")
			expectNothing(name, 800*time.Millisecond)
		}
		r = raw(http.MethodPost, "/v1/topics/"+name+"/ack?receipt_handle="+m.ReceiptHandle+"&receipt_handle=garbage&extend=false", nil)
		Expect(r.Status).To(Equal(http.StatusNoContent), "the first receipt_handle wins; extend=false acks")
		expectNothing(name, 2000*time.Millisecond)
	})

	It("waits the whole budget and answers 204 when nothing arrives", func() {
		name := uniqueTopic("timeout")
		createTopic(client.CreateTopicRequest{Name: name})
		start := time.Now()
		expectNothing(name, 1200*time.Millisecond)
		Expect(time.Since(start)).To(BeNumerically(">=", 1100*time.Millisecond))
	})
})

var _ = Describe("Consume flow control", func() {
	It("stops handing out a partition's messages at max_in_flight_per_partition until one is settled", func() {
		name := uniqueTopic("inflight")
		createTopic(client.CreateTopicRequest{Name: name, MaxInFlightPerPartition: 2})
		produceTo(name, 0, "f0", "f1", "f2", "f3")
		a := consumeOne(name, time.Second)
		consumeOne(name, time.Second)
		expectNothing(name, 300*time.Millisecond)
		Expect(api.Ack(ctx(5*time.Second), name, a.ReceiptHandle)).To(Succeed())
		c := consumeOne(name, time.Second)
		Expect(c.Offset).To(Equal(int64(2)))
	})

	It("parks out-of-order acks up to max_acked_ahead_per_partition, then answers 503 keeping the lease", func() {
		name := uniqueTopic("ackedahead")
		createTopic(client.CreateTopicRequest{Name: name, MaxAckedAheadPerPartition: 2})
		produceTo(name, 0, "h0", "h1", "h2", "h3")
		var ms []client.Message
		for i := 0; i < 4; i++ {
			m := consumeOne(name, time.Second)
			Expect(m.Offset).To(Equal(int64(i)))
			ms = append(ms, m)
		}
		Expect(api.Ack(ctx(5*time.Second), name, ms[1].ReceiptHandle)).To(Succeed())
		Expect(api.Ack(ctx(5*time.Second), name, ms[2].ReceiptHandle)).To(Succeed())
		err := api.Ack(ctx(5*time.Second), name, ms[3].ReceiptHandle)
		Expect(statusOf(err)).To(Equal(http.StatusServiceUnavailable), "the acked-ahead window is full")
		Expect(api.Ack(ctx(5*time.Second), name, ms[0].ReceiptHandle)).To(Succeed(), "the frontier hole can always be acked")
		Expect(api.Ack(ctx(5*time.Second), name, ms[3].ReceiptHandle)).To(Succeed(), "the refused ack kept its lease")
		expectNothing(name, 300*time.Millisecond)
	})
})
