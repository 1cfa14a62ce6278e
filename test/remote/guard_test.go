package remote_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// The attack surface of remote children (docs/fanout.md "Remote children", docs/operating.md
// "Security"): one node with security on and --remote-allowed-hosts=127.0.0.1 (where this
// suite's fake targets listen). A remote link is an admin's tool; its target check follows no
// redirect and echoes nothing of what the target answers; a host off the list is never asked.
var _ = Describe("Remote children are no probe into the broker's network", Ordered, func() {
	const (
		adminPassword = "guard-Admin-pw-1"
		makerUser     = "maker"
		makerPassword = "maker-pw-1234"
		secret        = "INTERNAL-SECRET-93f1" // what an internal service would leak
		parent        = "ssrf-orders"
	)
	var (
		src      *harness.Cluster
		internal *httptest.Server // an internal service only the broker can reach
		hits     atomic.Int32     // requests the internal service saw
	)

	BeforeAll(func() {
		internal = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			_, _ = w.Write([]byte(`{"name":"` + parent + `","secret":"` + secret + `"}`))
		}))
		DeferCleanup(internal.Close)
		var err error
		src, err = harness.NewCluster(harness.ClusterOptions{N: 1, Logf: prefixed("guard"),
			Args:          []string{"--security-enabled=true", "--remote-allowed-hosts=127.0.0.1"},
			Env:           []string{"NARAD_ADMIN_PASSWORD=" + adminPassword},
			ClientOptions: []client.Option{client.WithBasicAuth("admin", adminPassword)},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(src.Cleanup)
		Expect(src.Start(ctx(90 * time.Second))).To(Succeed())
		_, err = src.Client(0).CreateUser(ctx(15*time.Second), client.CreateUserRequest{Username: makerUser,
			Password: makerPassword, Grants: []client.Grant{
				{Action: client.ActionCreate, Patterns: []string{"ssrf-*"}},
				{Action: client.ActionProduce, Patterns: []string{"ssrf-*"}},
			}})
		Expect(err).NotTo(HaveOccurred())
		// maker creates the parent, so maker owns it (the manage right).
		maker, err := client.New(src.URL(0), client.WithBasicAuth(makerUser, makerPassword))
		Expect(err).NotTo(HaveOccurred())
		_, err = harness.CreateTopicRetry(ctx(30*time.Second), maker, topicReq(parent))
		Expect(err).NotTo(HaveOccurred())
	})

	// attachAs posts a remote attach to url as user and returns the status and raw answer.
	attachAs := func(user, password, url string) (int, []byte) {
		GinkgoHelper()
		body, err := json.Marshal(map[string]any{"remote": client.RemoteChild{URL: url, Topic: parent,
			User: "u", Password: "target-pw-1"}})
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(ctx(20*time.Second), http.MethodPost,
			src.URL(0)+"/v1/topics/"+parent+"/children", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.SetBasicAuth(user, password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		logf("attach to %s as %s: %d %s", url, user, resp.StatusCode, b)
		return resp.StatusCode, b
	}
	reasonOf := func(b []byte) string {
		GinkgoHelper()
		var out struct{ Error, Reason string }
		Expect(json.Unmarshal(b, &out)).To(Succeed(), "answer %q is JSON", b)
		Expect(out.Error).NotTo(BeEmpty())
		return out.Reason
	}
	expectNoLink := func() {
		GinkgoHelper()
		l, err := src.Client(0).Children(ctx(10*time.Second), parent)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Children).To(BeEmpty(), "no link is left behind")
	}

	It("refuses a remote child to a user with only create on the prefix (403, JSON), asking nothing", func() {
		status, b := attachAs(makerUser, makerPassword, internal.URL)
		Expect(status).To(Equal(http.StatusForbidden))
		reasonOf(b)
		Expect(string(b)).NotTo(ContainSubstring(secret))
		Expect(hits.Load()).To(BeZero(), "the target was asked for a user who may not link")
		expectNoLink()
	})

	It("answers a target's redirect with redirect_refused and never follows it", func() {
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, internal.URL+r.URL.Path, code)
			}))
			status, b := attachAs("admin", adminPassword, redirector.URL)
			redirector.Close()
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "redirect %d", code)
			Expect(reasonOf(b)).To(Equal("redirect_refused"))
		}
		Expect(hits.Load()).To(BeZero(), "the broker followed a redirect to the internal service")
		expectNoLink()
	})

	It("answers a fixed reason and never a byte of what the target answered", func() {
		for _, tc := range []struct {
			status int
			body   string
			reason string
		}{
			{http.StatusOK, "<html><body>" + secret + "</body></html>", "bad_answer"},
			{http.StatusOK, `{"name":"other","note":"` + secret + `"}`, "bad_answer"},
			{http.StatusUnauthorized, `{"error":"` + secret + `"}`, "unauthorized"},
			{http.StatusBadRequest, `{"error":"` + secret + `"}`, "bad_answer"},
			{http.StatusTeapot, secret, "bad_answer"},
		} {
			leaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			status, b := attachAs("admin", adminPassword, leaky.URL)
			leaky.Close()
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "target answering %d %q", tc.status, tc.body)
			Expect(reasonOf(b)).To(Equal(tc.reason), "target answering %d %q", tc.status, tc.body)
			Expect(string(b)).NotTo(ContainSubstring(secret), "the answer echoes the target's body")
			Expect(string(b)).NotTo(ContainSubstring("INTERNAL"))
		}
		expectNoLink()
	})

	It("refuses, without asking it, a target host off --remote-allowed-hosts", func() {
		var asked atomic.Int32
		host := harness.NextHost() // another loopback address: not 127.0.0.1
		port, err := harness.FreePort(host)
		Expect(err).NotTo(HaveOccurred())
		off := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			asked.Add(1)
			_, _ = w.Write([]byte(`{"name":"` + parent + `"}`))
		}))
		off.Listener.Close()
		off.Listener, err = netListen(host, port)
		Expect(err).NotTo(HaveOccurred())
		off.Start()
		DeferCleanup(off.Close)
		for _, url := range []string{off.URL, internal.URL + "," + off.URL, src.URL(0)} {
			status, b := attachAs("admin", adminPassword, url)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "attach to %s", url)
			Expect(reasonOf(b)).To(Equal("not_allowed_host"), "attach to %s", url)
		}
		Expect(asked.Load()).To(BeZero(), "a host off the list was asked")
		Expect(hits.Load()).To(BeZero(), "no URL of a refused link is asked")
		expectNoLink()
		// The same target on the allowed host passes the check (the list is no blanket refusal).
		status, b := attachAs("admin", adminPassword, internal.URL)
		Expect(status).To(Equal(http.StatusOK), "attach to the allowed host: %s", b)
		Expect(string(b)).NotTo(ContainSubstring("target-pw-1"))
		Expect(string(b)).NotTo(ContainSubstring("password"))
		Expect(strings.Count(string(b), secret)).To(BeZero())
	})
})

// netListen listens on host:port (a loopback address the harness handed out).
func netListen(host string, port int) (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
}
