// Package e2e_test is the black-box conformance suite of the client API (docs/internals/http-api.md §1–§2.11, §2.20, §6) against one real `narad serve --dev` process.
package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestE2E(t *testing.T) {
	suite.Run(t, "narad e2e (dev mode)")
}

// node is the one dev-mode broker every spec of this suite talks to; specs isolate
// themselves by topic name.
var (
	node *harness.Node
	api  *client.Client
)

var _ = BeforeSuite(func() {
	var err error
	node, err = harness.NewNode(harness.Options{ID: "n1", Dev: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(node.Cleanup)
	Expect(node.StartReady()).To(Succeed())
	api = node.Client()
})

var _ = AfterEach(func() {
	if CurrentSpecReport().Failed() {
		GinkgoWriter.Printf("node log tail:\n%s\n", node.Tail(40))
	}
})

var topicSeq atomic.Int64

// uniqueTopic returns a topic name no other spec of this run uses.
func uniqueTopic(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

// ctx returns a context bounded to d, cancelled when the spec ends.
func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

// createTopic creates a topic and fails the spec on error.
func createTopic(req client.CreateTopicRequest) *client.Topic {
	GinkgoHelper()
	t, err := api.CreateTopic(ctx(10*time.Second), req)
	Expect(err).NotTo(HaveOccurred())
	return t
}

// rawResponse is an HTTP exchange seen without the client library's interpretation.
type rawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// raw sends one request straight to the node.
func raw(method, path string, body []byte) rawResponse {
	GinkgoHelper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx(15*time.Second), method, node.URL()+path, rd)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return rawResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// expectJSONError asserts the documented error shape (docs/internals/http-api.md §1.5): the status, a JSON
// content type, and a body with a non-empty string "error" field.
func expectJSONError(r rawResponse, status int) {
	GinkgoHelper()
	Expect(r.Status).To(Equal(status), "body: %s", r.Body)
	Expect(r.Header.Get("Content-Type")).To(HavePrefix("application/json"))
	var body map[string]any
	Expect(json.Unmarshal(r.Body, &body)).To(Succeed(), "body %q is not a JSON object", r.Body)
	Expect(body).To(HaveKeyWithValue("error", BeAssignableToTypeOf("")))
	Expect(body["error"]).NotTo(BeEmpty())
}

// consumeOne does a queue consume that must return exactly one message within wait.
func consumeOne(topic string, wait time.Duration) client.Message {
	GinkgoHelper()
	msgs, err := api.Consume(ctx(wait+10*time.Second), topic, client.ConsumeOptions{Wait: wait})
	Expect(err).NotTo(HaveOccurred())
	Expect(msgs).To(HaveLen(1), "expected one message within %s", wait)
	return msgs[0]
}

// expectNothing asserts a queue consume waiting `wait` gets 204.
func expectNothing(topic string, wait time.Duration) {
	GinkgoHelper()
	msgs, err := api.Consume(ctx(wait+10*time.Second), topic, client.ConsumeOptions{Wait: wait})
	Expect(err).NotTo(HaveOccurred())
	Expect(msgs).To(BeEmpty())
}

// waitVisible waits until the topic's high watermarks add up to n.
func waitVisible(topic string, n int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) int64 {
		hw, err := harness.HighWatermarks(ctx(5*time.Second), api, topic)
		g.Expect(err).NotTo(HaveOccurred())
		return harness.Sum(hw)
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(n))
}

// statusOf returns the HTTP status carried by a client error (0 for nil, -1 for a
// transport error).
func statusOf(err error) int {
	if err == nil {
		return 0
	}
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return -1
}

func intp(v int) *int     { return &v }
func i64p(v int64) *int64 { return &v }
