package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// replayRaw reads one record by partition+offset and returns the raw JSON of its Message
// object's fields (so whitespace inside payload is seen as the server sent it).
func replayRaw(topic string, partition int, offset int64) map[string]json.RawMessage {
	GinkgoHelper()
	r := raw(http.MethodGet, fmt.Sprintf("/v1/topics/%s/consume?partition=%d&offset=%d", topic, partition, offset), nil)
	Expect(r.Status).To(Equal(http.StatusOK), "replay p%d@%d: %s", partition, offset, r.Body)
	var fields map[string]json.RawMessage
	Expect(json.Unmarshal(r.Body, &fields)).To(Succeed())
	return fields
}

// replay reads one record through the client.
func replay(topic string, partition int, offset int64) client.Message {
	GinkgoHelper()
	msgs, err := api.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{Partition: intp(partition), Offset: i64p(offset)})
	Expect(err).NotTo(HaveOccurred())
	Expect(msgs).To(HaveLen(1), "replay p%d@%d", partition, offset)
	return msgs[0]
}

func fnvPartition(key string, partitions int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

var _ = Describe("Produce", func() {
	It("answers a single produce with 202 and an empty body", func() {
		name := uniqueTopic("single")
		createTopic(client.CreateTopicRequest{Name: name})
		r := raw(http.MethodPost, "/v1/topics/"+name+"/produce", []byte("hello"))
		Expect(r.Status).To(Equal(http.StatusAccepted))
		Expect(r.Body).To(BeEmpty())
		waitVisible(name, 1)
	})

	It("answers a batch produce with 202 and {\"accepted\":N}, storing each record's bytes by the batch encoding rule", func() {
		name := uniqueTopic("batch")
		createTopic(client.CreateTopicRequest{Name: name})
		body := `{"records":[
			{"key":"customer-42","payload":{"order_id" :  "ord_1"}},
			{"payload":"plain text","partition":1},
			{"partition":2,"payload":"AAEC/w==","payload_encoding":"base64"}]}`
		r := raw(http.MethodPost, "/v1/topics/"+name+"/produce/batch", []byte(body))
		Expect(r.Status).To(Equal(http.StatusAccepted), "%s", r.Body)
		Expect(r.Header.Get("Content-Type")).To(HavePrefix("application/json"))
		var acc map[string]any
		Expect(json.Unmarshal(r.Body, &acc)).To(Succeed())
		Expect(acc).To(Equal(map[string]any{"accepted": 3.0}))
		waitVisible(name, 3)

		kp := fnvPartition("customer-42", 3)
		order := []int{kp, 1, 2}
		keyed := replayRaw(name, kp, offsetOf(0, order))
		Expect(string(keyed["payload"])).To(Equal(`{"order_id" :  "ord_1"}`), "a JSON payload is stored as the exact text of the request")
		Expect(string(keyed["key"])).To(Equal(`"customer-42"`))

		text := replay(name, 1, offsetOf(1, order))
		Expect(text.Bytes()).To(Equal([]byte("plain text")), "a JSON string payload is stored as its UTF-8 content")
		bin := replay(name, 2, offsetOf(2, order))
		Expect(bin.PayloadEncoding).To(Equal("base64"))
		Expect(bin.Bytes()).To(Equal([]byte{0x00, 0x01, 0x02, 0xff}), "base64 records store the decoded bytes")
	})

	DescribeTable("delivers every payload byte-for-byte with the documented response encoding",
		func(body []byte, kind client.PayloadKind) {
			name := uniqueTopic("enc")
			createTopic(client.CreateTopicRequest{Name: name})
			Expect(api.Produce(ctx(5*time.Second), name, body, client.ProduceOptions{Partition: intp(0)})).To(Succeed())
			waitVisible(name, 1)

			fields := replayRaw(name, 0, 0)
			wire := fields["payload"]
			enc, hasEnc := fields["payload_encoding"]
			switch kind {
			case client.PayloadJSON:
				Expect(string(wire)).To(Equal(string(body)), "a JSON text is embedded byte-for-byte")
				Expect(hasEnc).To(BeFalse())
			case client.PayloadText:
				var s string
				Expect(json.Unmarshal(wire, &s)).To(Succeed(), "UTF-8 non-JSON is sent as a JSON string: %s", wire)
				Expect(s).To(Equal(string(body)))
				Expect(hasEnc).To(BeFalse())
			case client.PayloadBinary:
				var s string
				Expect(json.Unmarshal(wire, &s)).To(Succeed())
				Expect(s).To(Equal(base64.StdEncoding.EncodeToString(body)), "binary is standard padded base64")
				Expect(string(enc)).To(Equal(`"base64"`))
			}
			_, hasHandle := fields["receipt_handle"]
			Expect(hasHandle).To(BeFalse(), "replay reads carry no receipt handle")

			// The same bytes come back from a queue consume, and re-producing them via a
			// batch (consumed message → batch record) stores them unchanged.
			m := consumeOne(name, 5*time.Second)
			Expect(m.Kind()).To(Equal(kind))
			got, err := m.Bytes()
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(body))
			Expect(api.Ack(ctx(5*time.Second), name, m.ReceiptHandle)).To(Succeed())

			// Re-produce the consumed payload as a batch record, exactly as received (the Go
			// client compacts JSON payloads, so the body is written by hand). JSON null is the
			// one value a batch record may not carry; it goes as base64.
			rec := `{"partition":1,"payload":` + string(m.Payload)
			if m.PayloadEncoding != "" {
				rec += `,"payload_encoding":"` + m.PayloadEncoding + `"`
			}
			if string(m.Payload) == "null" {
				rec = `{"partition":1,"payload":"` + base64.StdEncoding.EncodeToString(body) + `","payload_encoding":"base64"`
			}
			r := raw(http.MethodPost, "/v1/topics/"+name+"/produce/batch", []byte(`{"records":[`+rec+`}]}`))
			Expect(r.Status).To(Equal(http.StatusAccepted), "%s", r.Body)
			waitVisible(name, 2)
			again, err := replay(name, 1, 0).Bytes()
			Expect(err).NotTo(HaveOccurred())
			Expect(again).To(Equal(body), "a consumed message re-produced through batch is unchanged")
		},
		Entry("JSON object with insignificant whitespace", []byte(`{ "a" : [ 1,  2 ] ,"b":"x y" }`), client.PayloadJSON),
		Entry("JSON array", []byte(`[1,"two",{"3":null}]`), client.PayloadJSON),
		Entry("JSON number", []byte(`42.5e1`), client.PayloadJSON),
		Entry("JSON literal true", []byte(`true`), client.PayloadJSON),
		Entry("JSON null", []byte(`null`), client.PayloadJSON),
		Entry("UTF-8 text", []byte("hello wörld <&> ✓"), client.PayloadText),
		Entry("text with control characters", []byte("tab\there\nnul\x00end"), client.PayloadText),
		Entry("text that almost looks like JSON", []byte(`{"unterminated": `), client.PayloadText),
		Entry("invalid UTF-8", []byte{0xff, 0xfe, 0x00, 0x80, 'a'}, client.PayloadBinary),
	)

	It("returns a produced JSON string literal and the equivalent text alike, as the documented consumer rule says", func() {
		name := uniqueTopic("strlit")
		createTopic(client.CreateTopicRequest{Name: name})
		Expect(api.Produce(ctx(5*time.Second), name, []byte(`"hi"`), client.ProduceOptions{Partition: intp(0)})).To(Succeed())
		Expect(api.Produce(ctx(5*time.Second), name, []byte(`hi`), client.ProduceOptions{Partition: intp(0)})).To(Succeed())
		waitVisible(name, 2)
		Expect(string(replayRaw(name, 0, 0)["payload"])).To(Equal(`"hi"`))
		Expect(string(replayRaw(name, 0, 1)["payload"])).To(Equal(`"hi"`))
	})

	It("routes keyed messages to FNV-1a-32(key) mod partitions, consistently for the same key", func() {
		name := uniqueTopic("keyed")
		createTopic(client.CreateTopicRequest{Name: name, Partitions: 7})
		want := map[string]int{}
		for i := 0; i < 20; i++ {
			key := fmt.Sprintf("key-%d", i*7919)
			want[key] = fnvPartition(key, 7)
			for rep := 0; rep < 2; rep++ {
				Expect(api.Produce(ctx(5*time.Second), name, []byte(fmt.Sprintf("%s#%d", key, rep)),
					client.ProduceOptions{Key: key})).To(Succeed())
			}
		}
		waitVisible(name, 40)
		ds, err := harness.Drain(ctx(30*time.Second), api, name, harness.DrainOptions{
			Quiet: 300 * time.Millisecond, Done: func(got []harness.Delivery) bool { return len(got) >= 40 },
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ds).To(HaveLen(40))
		for _, d := range ds {
			Expect(d.Key).NotTo(BeEmpty())
			Expect(d.Partition).To(Equal(want[d.Key]), "key %q", d.Key)
		}
	})

	It("spreads keyless messages round-robin over the partitions", func() {
		name := uniqueTopic("rr")
		createTopic(client.CreateTopicRequest{Name: name, Partitions: 3})
		for i := 0; i < 30; i++ {
			Expect(api.Produce(ctx(5*time.Second), name, []byte(fmt.Sprint(i)), client.ProduceOptions{})).To(Succeed())
		}
		waitVisible(name, 30)
		hw, err := harness.HighWatermarks(ctx(5*time.Second), api, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(hw).To(Equal([]int64{10, 10, 10}))
	})

	It("rejects payloads a schema topic's schema does not accept with 400, and accepts nothing of a bad batch", func() {
		name := uniqueTopic("schema")
		schema := `{"type":"object","required":["id"],"properties":{"id":{"type":"integer"}}}`
		createTopic(client.CreateTopicRequest{Name: name, Schema: json.RawMessage(schema)})

		Expect(api.Produce(ctx(5*time.Second), name, []byte(`{"id":1}`), client.ProduceOptions{Partition: intp(0)})).To(Succeed())
		for _, bad := range []string{`{"id":"one"}`, `{"name":"x"}`, `[1]`, `not json at all`} {
			r := raw(http.MethodPost, "/v1/topics/"+name+"/produce?partition=0", []byte(bad))
			expectJSONError(r, http.StatusBadRequest)
		}
		p0 := intp(0)
		_, err := api.ProduceBatch(ctx(5*time.Second), name, []client.BatchRecord{
			{Payload: json.RawMessage(`{"id":2}`), Partition: p0},
			{Payload: json.RawMessage(`{"id":"bad"}`), Partition: p0},
		})
		Expect(statusOf(err)).To(Equal(http.StatusBadRequest))
		var ce *client.Error
		Expect(err).To(BeAssignableToTypeOf(ce))
		ce = err.(*client.Error)
		Expect(ce.Index).NotTo(BeNil())
		Expect(*ce.Index).To(Equal(1), "the error names the first failing record")

		Expect(api.Produce(ctx(5*time.Second), name, []byte(`{"id":3}`), client.ProduceOptions{Partition: p0})).To(Succeed())
		waitVisible(name, 2)
		Consistently(func(g Gomega) int64 {
			hw, err := harness.HighWatermarks(ctx(5*time.Second), api, name)
			g.Expect(err).NotTo(HaveOccurred())
			return harness.Sum(hw)
		}).WithTimeout(300*time.Millisecond).WithPolling(50*time.Millisecond).Should(Equal(int64(2)),
			"no record of the refused batch was accepted")
		Expect(replay(name, 0, 0).Bytes()).To(Equal([]byte(`{"id":1}`)))
		Expect(replay(name, 0, 1).Bytes()).To(Equal([]byte(`{"id":3}`)))
	})
})

// offsetOf returns the offset record i got when records were sent, in order, to the
// partitions listed in order (one partition per record): the count of earlier records sent
// to the same partition.
func offsetOf(i int, order []int) int64 {
	n := int64(0)
	for _, q := range order[:i] {
		if q == order[i] {
			n++
		}
	}
	return n
}
