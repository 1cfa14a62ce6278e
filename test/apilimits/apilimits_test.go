// Package apilimits_test drives a real narad node past the client API's limits as a hostile or
// careless client would: the produce memory budget, key rules, header size and the delete of
// a parent topic. Each limit must answer with a JSON error and lose no accepted message.
package apilimits_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestAPILimits(t *testing.T) {
	suite.Run(t, "client API limits")
}

// budget is the node's produce budget: two of the 7 MB batches below fit at once, three do not.
const budget = 16 << 20

// answerBudget is the node's consume answer budget, the least it may be: one full answer.
const answerBudget = 8 << 20

var (
	node *harness.Node
	cl   *client.Client
)

var _ = BeforeSuite(func() {
	n, err := harness.NewNode(harness.Options{ID: "n1", Dev: true,
		Args: []string{"--max-inflight-request-bytes", fmt.Sprint(budget), "--max-inflight-answer-bytes", fmt.Sprint(answerBudget)}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(n.Cleanup)
	Expect(n.StartReady()).To(Succeed())
	node, cl = n, n.Client()
})

// raw sends one request and returns status, headers and the decoded JSON body.
func raw(method, path string, body []byte) (int, http.Header, map[string]any) {
	GinkgoHelper()
	req, err := http.NewRequest(method, node.URL()+path, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		Expect(json.Unmarshal(b, &m)).To(Succeed(), "body %q is not JSON (status %d)", b, resp.StatusCode)
	}
	return resp.StatusCode, resp.Header, m
}

// storedRecords sums the records written to topic's partitions.
func storedRecords(ctx context.Context, topic string) int64 {
	GinkgoHelper()
	d, err := cl.GetTopic(ctx, topic, nil)
	Expect(err).NotTo(HaveOccurred())
	var n int64
	for _, p := range d.PartitionStats {
		n += p.NextOffset - p.OldestOffset
	}
	return n
}

var _ = Describe("the client API under hostile load", func() {
	It("refuses produce over the in-flight byte budget with 503 and Retry-After, and keeps every accepted message", func(ctx SpecContext) {
		_, err := cl.CreateTopic(ctx, client.CreateTopicRequest{Name: "flood"})
		Expect(err).NotTo(HaveOccurred())
		payload := strings.Repeat("x", 1_000_000)
		var recs []string
		for range 7 {
			recs = append(recs, `{"payload":"`+payload+`"}`)
		}
		body := []byte(`{"records":[` + strings.Join(recs, ",") + `]}`) // about 7 MB

		const producers = 16
		statuses := make([]int, producers)
		retryAfter := make([]string, producers)
		var wg sync.WaitGroup
		for i := range producers {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				st, h, _ := raw("POST", "/v1/topics/flood/produce/batch", body)
				statuses[i], retryAfter[i] = st, h.Get("Retry-After")
			}()
		}
		wg.Wait()
		accepted, refused := 0, 0
		for i, st := range statuses {
			switch st {
			case 202:
				accepted++
			case 503:
				refused++
				Expect(retryAfter[i]).NotTo(BeEmpty(), "503 without Retry-After")
			default:
				Fail(fmt.Sprintf("produce %d answered %d", i, st))
			}
		}
		Expect(accepted).To(BeNumerically(">", 0))
		Expect(refused).To(BeNumerically(">", 0), "16 concurrent 7 MB batches all fit a 16 MiB budget")
		// Accepted records reach the partition logs from the ingress shortly after the 202.
		Eventually(func() int64 { return storedRecords(ctx, "flood") }).WithTimeout(30*time.Second).
			Should(Equal(int64(7*accepted)), "every accepted record is stored, no refused one is")

		// The budget comes back: produces one after the other all fit.
		for range 3 {
			st, _, _ := raw("POST", "/v1/topics/flood/produce/batch", body)
			Expect(st).To(Equal(202))
		}
	})

	It("holds consume answers to slow readers within the answer budget and answers 503 beyond it", func(ctx SpecContext) {
		_, err := cl.CreateTopic(ctx, client.CreateTopicRequest{Name: "slow"})
		Expect(err).NotTo(HaveOccurred())
		payload := bytes.Repeat([]byte{0xff}, 1_000_000) // binary: base64 in answers, 1.33 MB each
		for range 16 {
			st, _, _ := raw("POST", "/v1/topics/slow/produce", payload)
			Expect(st).To(Equal(202))
		}
		Eventually(func() int64 { return storedRecords(ctx, "slow") }).WithTimeout(30 * time.Second).Should(Equal(int64(16)))

		// A reader that asks for everything and reads nothing: its answer (8 messages, all the
		// budget) stays in the node until the write fails.
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			return errors.Join(err, serr)
		}}
		slow, err := d.DialContext(ctx, "tcp", node.HTTPAddr)
		Expect(err).NotTo(HaveOccurred())
		defer slow.Close()
		_, err = fmt.Fprintf(slow, "GET /v1/topics/slow/consume?max_messages=1000 HTTP/1.1\r\nHost: narad\r\n\r\n")
		Expect(err).NotTo(HaveOccurred())
		// Its status line arriving means the node holds its messages and writes the answer.
		Expect(slow.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		status := make([]byte, 12)
		_, err = io.ReadFull(slow, status)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(status)).To(Equal("HTTP/1.1 200"))

		Eventually(func() int {
			st, h, body := raw("GET", "/v1/topics/slow/consume", nil)
			if st == 503 {
				Expect(h.Get("Retry-After")).NotTo(BeEmpty(), "503 without Retry-After")
				Expect(body["error"]).To(ContainSubstring("consume answer bytes in flight"))
			}
			return st
		}).WithTimeout(10*time.Second).Should(Equal(503), "the node answered beyond its answer budget")

		// The slow reader leaves: its answer's budget comes back, and the next consume is served.
		Expect(slow.Close()).To(Succeed())
		Eventually(func() int {
			st, _, _ := raw("GET", "/v1/topics/slow/consume", nil)
			return st
		}).WithTimeout(40 * time.Second).Should(Equal(200))
	})

	It("refuses keys that are not UTF-8 and returns a valid key exactly", func(ctx SpecContext) {
		_, err := cl.CreateTopic(ctx, client.CreateTopicRequest{Name: "keys"})
		Expect(err).NotTo(HaveOccurred())
		st, _, body := raw("POST", "/v1/topics/keys/produce?key=%00%ff%fe", []byte("x"))
		Expect(st).To(Equal(400))
		Expect(body).To(HaveKeyWithValue("field", "key"))
		st, _, body = raw("POST", "/v1/topics/keys/produce/batch", []byte(`{"records":[{"key":"a\ud800","payload":"x"}]}`))
		Expect(st).To(Equal(400))
		Expect(body).To(HaveKeyWithValue("index", BeNumerically("==", 0)))
		st, _, _ = raw("POST", "/v1/topics/keys/produce?key="+strings.Repeat("k", 4097), []byte("x"))
		Expect(st).To(Equal(400))

		key := "\x00é☃😀"
		Expect(cl.Produce(ctx, "keys", []byte("v"), client.ProduceOptions{Key: key})).To(Succeed())
		c2, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		msgs, err := cl.Consume(c2, "keys", client.ConsumeOptions{Wait: 5 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).To(HaveLen(1))
		Expect(msgs[0].Key).To(Equal(key))
		Consistently(func() int64 { return storedRecords(ctx, "keys") }).WithTimeout(time.Second).
			Should(Equal(int64(1)), "no refused key was stored")
	})

	It("answers oversized request headers with a JSON 431", func() {
		req, err := http.NewRequest("GET", node.URL()+"/v1/topics", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("X-Big", strings.Repeat("a", 1<<20+8<<10))
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(431))
		Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
		var m map[string]any
		Expect(json.NewDecoder(resp.Body).Decode(&m)).To(Succeed())
		Expect(m["error"]).To(ContainSubstring("too large"))
	})

	It("refuses a topic limit above its maximum with a 400 naming the field", func() {
		st, _, body := raw("POST", "/v1/topics", []byte(`{"name":"huge","visibility_timeout_ms":9223372036854775807}`))
		Expect(st).To(Equal(400))
		Expect(body).To(HaveKeyWithValue("field", "visibility_timeout_ms"))
		st, _, body = raw("POST", "/v1/topics", []byte(`{"name":"cyclic","schema":{"$ref":"#"}}`))
		Expect(st).To(Equal(400))
		Expect(body["error"]).To(ContainSubstring("$ref cycle"))
	})

	It("deletes a parent only with detach_children=true and says what its delay child lost", func(ctx SpecContext) {
		for _, n := range []string{"par", "par-late"} {
			_, err := cl.CreateTopic(ctx, client.CreateTopicRequest{Name: n})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := cl.Attach(ctx, "par", "par-late", 3_600_000)
		Expect(err).NotTo(HaveOccurred())
		for i := range 5 {
			Expect(cl.Produce(ctx, "par", []byte(fmt.Sprint(i)), client.ProduceOptions{})).To(Succeed())
		}
		Eventually(func(g Gomega) int64 {
			l, err := cl.Children(ctx, "par")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l.Children).To(HaveLen(1))
			return l.Children[0].LagMessages
		}).WithTimeout(30*time.Second).Should(Equal(int64(5)), "the five messages wait out the hour's delay")
		err = cl.DeleteTopic(ctx, "par")
		var e *client.Error
		Expect(err).To(BeAssignableToTypeOf(e))
		Expect(err.(*client.Error).Status).To(Equal(409))
		Expect(err.(*client.Error).Children).To(ConsistOf("par-late"))

		d, err := cl.DeleteTopicWith(ctx, "par", client.DeleteTopicOptions{DetachChildren: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.DetachedChildren).To(HaveLen(1))
		Expect(d.DetachedChildren[0].Name).To(Equal("par-late"))
		Expect(d.DetachedChildren[0].UndeliveredMessages).To(Equal(int64(5)), "the hour-delayed messages are reported lost")
		t, err := cl.GetTopic(ctx, "par-late", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Role).To(Equal("standalone"))
	})
})
