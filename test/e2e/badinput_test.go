package e2e_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
)

// {t} in a path or body is replaced by the suite's existing 3-partition topic.
const topicToken = "{t}"

var (
	overMiB       = strings.Repeat("a", 1<<20+1)
	exactMiB      = strings.Repeat("b", 1<<20)
	hugeJSON      = `{"name":"huge","schema":{"description":"` + overMiB + `"}}`
	tooManyRecs   = `{"records":[` + strings.TrimSuffix(strings.Repeat(`{"payload":1},`, 4097), ",") + `]}`
	bigBatchValue = `{"records":[{"payload":"` + overMiB + `"}]}`
	longName      = strings.Repeat("n", 256)
)

var _ = Describe("Malformed requests", Ordered, func() {
	var topic string
	BeforeAll(func() {
		topic = uniqueTopic("badinput")
		createTopic(client.CreateTopicRequest{Name: topic})
	})

	DescribeTable("get the documented 4xx with a JSON error body, never a 5xx",
		func(method, path, body string, status int) {
			path = strings.ReplaceAll(path, topicToken, topic)
			body = strings.ReplaceAll(body, topicToken, topic)
			var b []byte
			if body != "" {
				b = []byte(body)
			}
			expectJSONError(raw(method, path, b), status)
		},
		// POST /v1/topics
		Entry("create: malformed JSON", "POST", "/v1/topics", `{"name":`, 400),
		Entry("create: two JSON values", "POST", "/v1/topics", `{"name":"two-a"} {"name":"two-b"}`, 400),
		Entry("create: unknown field", "POST", "/v1/topics", `{"name":"uf","zzz":1}`, 400),
		Entry("create: wrong type", "POST", "/v1/topics", `{"name":5}`, 400),
		Entry("create: missing name", "POST", "/v1/topics", `{"partitions":3}`, 400),
		Entry("create: name with a space", "POST", "/v1/topics", `{"name":"a b"}`, 400),
		Entry("create: name ..", "POST", "/v1/topics", `{"name":".."}`, 400),
		Entry("create: name over 255 bytes", "POST", "/v1/topics", `{"name":"`+longName+`"}`, 400),
		Entry("create: 2 partitions", "POST", "/v1/topics", `{"name":"p2","partitions":2}`, 400),
		Entry("create: 109 partitions", "POST", "/v1/topics", `{"name":"p109","partitions":109}`, 400),
		Entry("create: retention under an hour", "POST", "/v1/topics", `{"name":"r5","retention_ms":5}`, 400),
		Entry("create: negative retention", "POST", "/v1/topics", `{"name":"rneg","retention_ms":-1}`, 400),
		Entry("create: negative visibility", "POST", "/v1/topics", `{"name":"vneg","visibility_timeout_ms":-1}`, 400),
		Entry("create: negative max in flight", "POST", "/v1/topics", `{"name":"mneg","max_in_flight_per_partition":-5}`, 400),
		Entry("create: fanout delay without parent", "POST", "/v1/topics", `{"name":"fd","fanout_delay_ms":1000}`, 400),
		Entry("create: invalid JSON schema", "POST", "/v1/topics", `{"name":"bads","schema":{"type":12}}`, 400),
		Entry("create: existing name", "POST", "/v1/topics", `{"name":"{t}"}`, 409),
		Entry("create: unknown parent", "POST", "/v1/topics", `{"name":"orphan-child-x","parent":"no-such-parent-x"}`, 404),
		Entry("create: JSON body over 1 MiB", "POST", "/v1/topics", hugeJSON, 413),

		// GET /v1/topics
		Entry("list: limit 0", "GET", "/v1/topics?limit=0", "", 400),
		Entry("list: negative limit", "GET", "/v1/topics?limit=-3", "", 400),
		Entry("list: non-integer limit", "GET", "/v1/topics?limit=ten", "", 400),

		// GET /v1/topics/{t}
		Entry("describe: unknown topic", "GET", "/v1/topics/no-such-topic-x", "", 404),
		Entry("describe: partition out of range", "GET", "/v1/topics/{t}?partition=3", "", 400),
		Entry("describe: negative partition", "GET", "/v1/topics/{t}?partition=-1", "", 400),
		Entry("describe: non-integer partition", "GET", "/v1/topics/{t}?partition=one", "", 400),

		// PATCH /v1/topics/{t}
		Entry("alter: empty object", "PATCH", "/v1/topics/{t}", `{}`, 400),
		Entry("alter: malformed JSON", "PATCH", "/v1/topics/{t}", `{"partitions":`, 400),
		Entry("alter: name is not alterable", "PATCH", "/v1/topics/{t}", `{"name":"renamed"}`, 400),
		Entry("alter: shrink partitions", "PATCH", "/v1/topics/{t}", `{"partitions":2}`, 400),
		Entry("alter: same partition count", "PATCH", "/v1/topics/{t}", `{"partitions":3}`, 400),
		Entry("alter: negative partitions", "PATCH", "/v1/topics/{t}", `{"partitions":-4}`, 400),
		Entry("alter: partitions above the maximum", "PATCH", "/v1/topics/{t}", `{"partitions":109}`, 400),
		Entry("alter: retention under an hour", "PATCH", "/v1/topics/{t}", `{"retention_ms":1000}`, 400),
		Entry("alter: negative visibility", "PATCH", "/v1/topics/{t}", `{"visibility_timeout_ms":-1}`, 400),
		Entry("alter: unknown topic", "PATCH", "/v1/topics/no-such-topic-x", `{"visibility_timeout_ms":5}`, 404),

		// DELETE /v1/topics/{t}
		Entry("delete: unknown topic", "DELETE", "/v1/topics/no-such-topic-x", "", 404),

		// POST /v1/topics/{t}/produce
		Entry("produce: empty body", "POST", "/v1/topics/{t}/produce", "", 400),
		Entry("produce: partition out of range", "POST", "/v1/topics/{t}/produce?partition=3", "x", 400),
		Entry("produce: negative partition", "POST", "/v1/topics/{t}/produce?partition=-1", "x", 400),
		Entry("produce: non-integer partition", "POST", "/v1/topics/{t}/produce?partition=abc", "x", 400),
		Entry("produce: empty partition", "POST", "/v1/topics/{t}/produce?partition=", "x", 400),
		Entry("produce: partition twice", "POST", "/v1/topics/{t}/produce?partition=0&partition=1", "x", 400),
		Entry("produce: key twice", "POST", "/v1/topics/{t}/produce?key=a&key=b", "x", 400),
		Entry("produce: unknown topic", "POST", "/v1/topics/no-such-topic-x/produce", "x", 404),
		Entry("produce: body over 1 MiB", "POST", "/v1/topics/{t}/produce", overMiB, 413),

		// POST /v1/topics/{t}/produce/batch
		Entry("batch: malformed JSON", "POST", "/v1/topics/{t}/produce/batch", `{"records":[`, 400),
		Entry("batch: no records", "POST", "/v1/topics/{t}/produce/batch", `{"records":[]}`, 400),
		Entry("batch: records missing", "POST", "/v1/topics/{t}/produce/batch", `{}`, 400),
		Entry("batch: null payload", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"payload":null}]}`, 400),
		Entry("batch: absent payload", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"key":"k"}]}`, 400),
		Entry("batch: bad base64", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"payload":"!!","payload_encoding":"base64"}]}`, 400),
		Entry("batch: unpadded base64", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"payload":"AAE","payload_encoding":"base64"}]}`, 400),
		Entry("batch: unknown encoding", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"payload":"00","payload_encoding":"hex"}]}`, 400),
		Entry("batch: partition out of range", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"payload":1,"partition":3}]}`, 400),
		Entry("batch: unknown record field", "POST", "/v1/topics/{t}/produce/batch", `{"records":[{"payload":1,"zzz":2}]}`, 400),
		Entry("batch: 4097 records", "POST", "/v1/topics/{t}/produce/batch", tooManyRecs, 400),
		Entry("batch: unknown topic", "POST", "/v1/topics/no-such-topic-x/produce/batch", `{"records":[{"payload":1}]}`, 404),
		Entry("batch: a payload over 1 MiB", "POST", "/v1/topics/{t}/produce/batch", bigBatchValue, 413),

		// GET /v1/topics/{t}/consume
		Entry("consume: bare number wait", "GET", "/v1/topics/{t}/consume?wait=5", "", 400),
		Entry("consume: non-duration wait", "GET", "/v1/topics/{t}/consume?wait=soon", "", 400),
		Entry("consume: offset without partition", "GET", "/v1/topics/{t}/consume?offset=0", "", 400),
		Entry("consume: partition out of range", "GET", "/v1/topics/{t}/consume?partition=3", "", 400),
		Entry("consume: non-integer partition", "GET", "/v1/topics/{t}/consume?partition=x", "", 400),
		Entry("consume: negative offset", "GET", "/v1/topics/{t}/consume?partition=0&offset=-1", "", 400),
		Entry("consume: non-integer offset", "GET", "/v1/topics/{t}/consume?partition=0&offset=z", "", 400),
		Entry("consume: max_messages 0", "GET", "/v1/topics/{t}/consume?max_messages=0", "", 400),
		Entry("consume: max_messages 1001", "GET", "/v1/topics/{t}/consume?max_messages=1001", "", 400),
		Entry("consume: non-integer max_messages", "GET", "/v1/topics/{t}/consume?max_messages=all", "", 400),
		Entry("consume: unknown topic", "GET", "/v1/topics/no-such-topic-x/consume", "", 404),

		// POST /v1/topics/{t}/ack
		Entry("ack: missing handle", "POST", "/v1/topics/{t}/ack", "", 400),
		Entry("ack: empty handle", "POST", "/v1/topics/{t}/ack?receipt_handle=", "", 400),
		Entry("ack: malformed handle", "POST", "/v1/topics/{t}/ack?receipt_handle=abc", "", 400),
		Entry("ack: two-part handle", "POST", "/v1/topics/{t}/ack?receipt_handle=1:2", "", 400),
		Entry("ack: zero nonce", "POST", "/v1/topics/{t}/ack?receipt_handle=1:2:0", "", 400),
		Entry("ack: negative partition in handle", "POST", "/v1/topics/{t}/ack?receipt_handle=-1:2:3", "", 400),
		Entry("ack: handle partition out of range", "POST", "/v1/topics/{t}/ack?receipt_handle=9:0:5", "", 400),
		Entry("ack: bad extend value", "POST", "/v1/topics/{t}/ack?receipt_handle=0:0:5&extend=maybe", "", 400),
		Entry("ack: no live reservation", "POST", "/v1/topics/{t}/ack?receipt_handle=0:0:5", "", 410),
		Entry("nack: no live reservation", "POST", "/v1/topics/{t}/ack?receipt_handle=0:0:5&extend=0", "", 410),
		Entry("ack: unknown topic", "POST", "/v1/topics/no-such-topic-x/ack?receipt_handle=0:0:5", "", 404),

		// POST /v1/topics/{t}/ack/batch
		Entry("ack batch: malformed JSON", "POST", "/v1/topics/{t}/ack/batch", `{"acks":`, 400),
		Entry("ack batch: acks of the wrong type", "POST", "/v1/topics/{t}/ack/batch", `{"acks":5}`, 400),
		Entry("ack batch: no entries", "POST", "/v1/topics/{t}/ack/batch", `{"acks":[]}`, 400),
		Entry("ack batch: 1001 entries", "POST", "/v1/topics/{t}/ack/batch",
			`{"acks":[`+strings.TrimSuffix(strings.Repeat(`{"receipt_handle":"0:0:5"},`, 1001), ",")+`]}`, 400),
		Entry("ack batch: unknown topic", "POST", "/v1/topics/no-such-topic-x/ack/batch", `{"acks":[{"receipt_handle":"0:0:5"}]}`, 404),

		// /v1/users (dev mode acts as the root admin)
		Entry("users: no password", "POST", "/v1/users", `{"username":"nopw"}`, 400),
		Entry("users: bad username", "POST", "/v1/users", `{"username":"a b","password":"x"}`, 400),
		Entry("users: password over 72 bytes", "POST", "/v1/users", `{"username":"longpw","password":"`+strings.Repeat("p", 73)+`"}`, 400),
		Entry("users: unknown action", "POST", "/v1/users", `{"username":"ua","password":"x","grants":[{"action":"fly","patterns":["a"]}]}`, 400),
		Entry("users: produce grant without patterns", "POST", "/v1/users", `{"username":"np","password":"x","grants":[{"action":"produce"}]}`, 400),
		Entry("users: admin grant with patterns", "POST", "/v1/users", `{"username":"ap","password":"x","grants":[{"action":"admin","patterns":["a"]}]}`, 400),
		Entry("users: wildcard in the middle", "POST", "/v1/users", `{"username":"wm","password":"x","grants":[{"action":"consume","patterns":["a*b"]}]}`, 400),
		Entry("users: unknown user", "GET", "/v1/users/no-such-user-x", "", 404),
		Entry("users: delete unknown user", "DELETE", "/v1/users/no-such-user-x", "", 404),
		Entry("users: unknown field", "POST", "/v1/users", `{"username":"uf","password":"x","admin":true}`, 400),

		// Routing
		Entry("unknown route", "GET", "/v1/nothing-here", "", 404),
		Entry("unknown route outside /v1", "GET", "/v2/topics", "", 404),
	)

	DescribeTable("answers a known route with the wrong method with 405 and an Allow header",
		func(method, path string) {
			path = strings.ReplaceAll(path, topicToken, topic)
			r := raw(method, path, nil)
			expectJSONError(r, http.StatusMethodNotAllowed)
			Expect(r.Header.Get("Allow")).NotTo(BeEmpty())
		},
		Entry("PUT /v1/topics", "PUT", "/v1/topics"),
		Entry("POST /v1/topics/{t}", "POST", "/v1/topics/{t}"),
		Entry("GET /v1/topics/{t}/produce", "GET", "/v1/topics/{t}/produce"),
		Entry("DELETE /v1/topics/{t}/consume", "DELETE", "/v1/topics/{t}/consume"),
		Entry("GET /v1/topics/{t}/ack", "GET", "/v1/topics/{t}/ack"),
	)

	It("accepts a produce body of exactly 1 MiB", func() {
		Expect(api.Produce(ctx(10*time.Second), topic, []byte(exactMiB), client.ProduceOptions{Partition: intp(0)})).To(Succeed())
		Eventually(func(g Gomega) {
			m, err := api.Consume(ctx(5*time.Second), topic, client.ConsumeOptions{Partition: intp(0), Offset: i64p(0)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m).To(HaveLen(1))
			b, err := m[0].Bytes()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(len(b)).To(Equal(1 << 20))
		}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	})
})
