package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
)

// rawConn is one client connection to the node, written and read byte for byte.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw() *rawConn {
	GinkgoHelper()
	c, err := net.DialTimeout("tcp", node.HTTPAddr, 5*time.Second)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	Expect(c.SetDeadline(time.Now().Add(30 * time.Second))).To(Succeed())
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// do sends one request as written and reads its answer.
func (r *rawConn) do(request string) (*http.Response, string) {
	GinkgoHelper()
	_, err := io.WriteString(r.c, request)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.ReadResponse(r.br, nil)
	Expect(err).NotTo(HaveOccurred())
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp, string(b)
}

// handoffs reads narad_http_handoffs_total over a connection of its own (which is handed
// over itself, /metrics not being a fast route, and is counted in what it reads).
func handoffs() float64 {
	GinkgoHelper()
	_, page := dialRaw().do("GET /metrics HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n")
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, "narad_http_handoffs_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			Expect(err).NotTo(HaveOccurred())
			return f
		}
	}
	Fail("no narad_http_handoffs_total on /metrics")
	return 0
}

var _ = Describe("the fast HTTP path", func() {
	It("serves produce, consume and ack on one keep-alive connection, and hands a connection to net/http at its first request of another shape", func() {
		topic := uniqueTopic("fast")
		createTopic(client.CreateTopicRequest{Name: topic})
		before := handoffs()

		c := dialRaw()
		resp, _ := c.do(fmt.Sprintf("POST /v1/topics/%s/produce HTTP/1.1\r\nHost: n\r\nContent-Length: 5\r\n\r\nhello", topic))
		Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
		Expect(resp.Header.Get("Date")).NotTo(BeEmpty())
		resp, body := c.do(fmt.Sprintf("GET /v1/topics/%s/consume?wait=5s HTTP/1.1\r\nHost: n\r\n\r\n", topic))
		Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
		Expect(resp.Header.Get("Content-Type")).To(HavePrefix("application/json"))
		Expect(body).To(ContainSubstring(`"payload":"hello"`))
		handle := between(body, `"receipt_handle":"`, `"`)
		resp, body = c.do(fmt.Sprintf("POST /v1/topics/%s/ack?receipt_handle=%s HTTP/1.1\r\nHost: n\r\nContent-Length: 0\r\n\r\n",
			topic, strings.ReplaceAll(handle, ":", "%3A")))
		Expect(resp.StatusCode).To(Equal(http.StatusNoContent), body)
		// A bad query on a fast route gets its documented JSON answer on the fast path.
		resp, body = c.do(fmt.Sprintf("GET /v1/topics/%s/consume?wait=soon HTTP/1.1\r\nHost: n\r\n\r\n", topic))
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), body)
		Expect(body).To(ContainSubstring(`"error"`))
		Expect(handoffs()).To(Equal(before+1), "only the scrape's own connection was handed over")

		// A chunked produce: net/http takes the connection over and serves it to the end.
		resp, body = c.do(fmt.Sprintf("POST /v1/topics/%s/produce HTTP/1.1\r\nHost: n\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nworld\r\n0\r\n\r\n", topic))
		Expect(resp.StatusCode).To(Equal(http.StatusAccepted), body)
		resp, body = c.do(fmt.Sprintf("GET /v1/topics/%s/consume?wait=5s HTTP/1.1\r\nHost: n\r\n\r\n", topic))
		Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(`"payload":"world"`))
		Expect(handoffs()).To(Equal(before + 3))

		// A malformed request still gets net/http's refusal, as JSON.
		resp, body = dialRaw().do("POST /v1/topics/x/produce HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 1\r\n\r\nx")
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring(`"error"`))
	})
})

// between returns the text of s after the first from and before the next to.
func between(s, from, to string) string {
	GinkgoHelper()
	_, rest, ok := strings.Cut(s, from)
	Expect(ok).To(BeTrue(), "%q not in %q", from, s)
	v, _, ok := strings.Cut(rest, to)
	Expect(ok).To(BeTrue())
	return v
}
