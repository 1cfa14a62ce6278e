package e2e_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// scrapeRaw returns the /metrics page as served.
func scrapeRaw() string {
	GinkgoHelper()
	r := raw(http.MethodGet, "/metrics", nil)
	Expect(r.Status).To(Equal(http.StatusOK))
	return string(r.Body)
}

// junk is a client-chosen token of n letters starting with marker (a valid HTTP method and
// path segment).
func junk(marker string, n int) string {
	var b strings.Builder
	b.WriteString(marker)
	for b.Len() < n {
		b.WriteByte(byte('A' + rand.IntN(26)))
	}
	return b.String()
}

var _ = Describe("Metric labels", func() {
	It("never carry a client-chosen method, path or unknown topic, however many requests make them up", func() {
		const marker = "ZQJUNK"
		before := scrapeRaw()
		Expect(before).NotTo(ContainSubstring(marker))

		do := func(method, path string) {
			req, err := http.NewRequestWithContext(ctx(15*time.Second), method, node.URL()+path, strings.NewReader("{}"))
			Expect(err).NotTo(HaveOccurred())
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			Expect(resp.StatusCode).To(BeNumerically(">=", 400), "%.40s %.60s", method, path)
		}
		for i := 0; i < 200; i++ {
			topic := junk(marker, 40)
			switch i % 5 {
			case 0: // made-up 2 KB method on a real route
				do(junk(marker, 2048), "/v1/topics")
			case 1: // made-up method and random path
				do(junk(marker, 512), "/"+junk(marker, 512))
			case 2: // known method, random path
				do(http.MethodGet, "/v1/"+junk(marker, 1024))
			case 3: // produce to a topic that does not exist
				do(http.MethodPost, "/v1/topics/"+topic+"/produce")
			default: // consume and ack on a topic that does not exist
				do(http.MethodGet, "/v1/topics/"+topic+"/consume?wait_ms=0")
				do(http.MethodPost, "/v1/topics/"+topic+"/ack?handle=x")
			}
		}

		after := scrapeRaw()
		Expect(after).NotTo(ContainSubstring(marker), "a client-chosen string became a label value")
		// The requests above add a handful of (route, method, status) series, not one per
		// request: 200 requests with made-up methods would add megabytes.
		Expect(len(after)-len(before)).To(BeNumerically("<", 128<<10),
			fmt.Sprintf("/metrics grew from %d to %d bytes", len(before), len(after)))
		Expect(after).To(ContainSubstring(`method="other"`))
		Expect(after).To(ContainSubstring(`route="unmatched"`))
	})
})

var _ = Describe("Oldest unconsumed message age", func() {
	It("is the age of the oldest unacked message and does not drop when a newer one is produced", func() {
		topic := uniqueTopic("age")
		createTopic(client.CreateTopicRequest{Name: topic})
		p0 := map[string]string{"topic": topic, "partition": "0"}
		for i := 0; i < 3; i++ {
			Expect(api.Produce(ctx(5*time.Second), topic, []byte("old"), client.ProduceOptions{Partition: intp(0)})).To(Succeed())
		}
		consumeOne(topic, time.Second) // leased, never acked: still unconsumed
		var before float64
		Eventually(func(g Gomega) {
			exp, err := harness.ScrapeMetrics(ctx(5*time.Second), node.URL())
			g.Expect(err).NotTo(HaveOccurred())
			v, ok := exp.Value("narad_oldest_unconsumed_message_age_seconds", p0)
			g.Expect(ok).To(BeTrue())
			// Older than one poll interval (5 s): a value taken from the produce's time
			// would read less after the next produce.
			g.Expect(v).To(BeNumerically(">=", 6))
			before = v
		}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		Expect(api.Produce(ctx(5*time.Second), topic, []byte("new"), client.ProduceOptions{Partition: intp(0)})).To(Succeed())
		Eventually(func(g Gomega) {
			exp, err := harness.ScrapeMetrics(ctx(5*time.Second), node.URL())
			g.Expect(err).NotTo(HaveOccurred())
			lag, _ := exp.Value("narad_consumer_lag_messages", p0)
			g.Expect(lag).To(Equal(4.0), "a poll after the fourth produce")
			age, _ := exp.Value("narad_oldest_unconsumed_message_age_seconds", p0)
			Expect(age).To(BeNumerically(">=", before), "the age dropped after a produce while older messages wait")
		}).WithTimeout(20 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	})
})
