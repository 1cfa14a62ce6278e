package auth_test

import (
	"io"
	"net"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/test/harness"
)

// from returns an HTTP client whose connections leave from the loopback address src, so the
// node sees src as the client address.
func from(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// rawFrom is raw (GET /v1/topics with Basic user:pass) sent from the address src.
func rawFrom(src, user, pass string) rawResponse {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx(15*time.Second), http.MethodGet, node.URL()+"/v1/topics", nil)
	Expect(err).NotTo(HaveOccurred())
	req.SetBasicAuth(user, pass)
	resp, err := from(src).Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return rawResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

var _ = Describe("Failed-login throttle", func() {
	It("never refuses the admin's right password from another address, however many failures one address sends", func() {
		attacker, operator := harness.NextHost(), harness.NextHost()
		for i := 0; i < 8; i++ {
			r := rawFrom(attacker, "admin", "guess")
			Expect(r.Status).To(BeElementOf(http.StatusUnauthorized, http.StatusTooManyRequests), "body %s", r.Body)
		}
		// The attacking address is throttled, for the right password too (no oracle).
		r := rawFrom(attacker, "admin", rootPassword)
		body := expectJSONError(r, http.StatusTooManyRequests)
		Expect(body["error"]).To(Equal("too many failed authentication attempts"))
		Expect(r.Header.Get("Retry-After")).To(Equal("12"))
		// The admin from another address logs in at once.
		Expect(rawFrom(operator, "admin", rootPassword).Status).To(Equal(http.StatusOK))
		_, _, err := root.ListTopics(ctx(5*time.Second), 1, "")
		Expect(err).NotTo(HaveOccurred(), "the suite's own admin client is not locked out either")
	})

	It("throttles an address that sprays passwords over many usernames", func() {
		sprayer, other := harness.NextHost(), harness.NextHost()
		name := unique("sprayed")
		newUser(name, "good-password", grant("consume", "x"))
		throttled := false
		for i := 0; i < 40 && !throttled; i++ { // a new username each time: no per-username bucket empties
			r := rawFrom(sprayer, unique("spray"), "guess")
			throttled = r.Status == http.StatusTooManyRequests
			if !throttled {
				Expect(r.Status).To(Equal(http.StatusUnauthorized))
			}
		}
		Expect(throttled).To(BeTrue(), "30 failures from one address throttle it")
		// The right password from the throttled address is refused too. The address regains one
		// attempt every 2 s, so the moment after a 429 can fall on a refill (a slow machine spends
		// seconds on the 30 password checks): then one more guess empties it again and the right
		// password is asked once more, at most three times.
		status := 0
		for try := 0; try < 3 && status != http.StatusTooManyRequests; try++ {
			if try > 0 {
				Expect(rawFrom(sprayer, unique("spray"), "guess").Status).To(BeElementOf(http.StatusUnauthorized, http.StatusTooManyRequests))
			}
			r := rawFrom(sprayer, name, "good-password")
			if status = r.Status; status == http.StatusTooManyRequests {
				expectJSONError(r, http.StatusTooManyRequests)
			}
		}
		Expect(status).To(Equal(http.StatusTooManyRequests), "the right password from the throttled address")
		Expect(rawFrom(other, name, "good-password").Status).To(Equal(http.StatusOK))
	})
})
