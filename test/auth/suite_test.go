// Package auth_test is the black-box suite of authentication, authorization and user
// management (docs/internals/http-api.md §1.2, §1.3, §2.15) against one real node with security on.
package auth_test

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

func TestAuth(t *testing.T) {
	suite.Run(t, "narad auth (security on)")
}

const rootPassword = "root-Secret-1"

var (
	node *harness.Node
	root *client.Client
)

var _ = BeforeSuite(func() {
	var err error
	node, err = harness.NewNode(harness.Options{ID: "n1", AdminPassword: rootPassword})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(node.Cleanup)
	Expect(node.StartReady()).To(Succeed())
	root = node.Client()
})

var seq atomic.Int64

// unique returns a name no other spec of this run uses.
func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

// as returns a client authenticating as user.
func as(user, pass string) *client.Client {
	GinkgoHelper()
	c, err := client.New(node.URL(), client.WithBasicAuth(user, pass))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// newUser creates a user as root and returns a client for it.
func newUser(name, pass string, grants ...client.Grant) *client.Client {
	GinkgoHelper()
	_, err := root.CreateUser(ctx(10*time.Second), client.CreateUserRequest{Username: name, Password: pass, Grants: grants})
	Expect(err).NotTo(HaveOccurred())
	return as(name, pass)
}

func createTopic(c *client.Client, name string) *client.Topic {
	GinkgoHelper()
	t, err := c.CreateTopic(ctx(10*time.Second), client.CreateTopicRequest{Name: name})
	Expect(err).NotTo(HaveOccurred())
	return t
}

type rawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// raw sends one request; user "" sends no credentials, otherwise the given Authorization
// header value (when authz != "") or Basic user:pass.
func raw(method, path, user, pass, authz string, body []byte) rawResponse {
	GinkgoHelper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx(15*time.Second), method, node.URL()+path, rd)
	Expect(err).NotTo(HaveOccurred())
	switch {
	case authz != "":
		req.Header.Set("Authorization", authz)
	case user != "":
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return rawResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// expectJSONError asserts status, JSON content type and a non-empty "error" field.
func expectJSONError(r rawResponse, status int) map[string]any {
	GinkgoHelper()
	Expect(r.Status).To(Equal(status), "body: %s", r.Body)
	Expect(r.Header.Get("Content-Type")).To(HavePrefix("application/json"))
	var body map[string]any
	Expect(json.Unmarshal(r.Body, &body)).To(Succeed(), "body %q", r.Body)
	Expect(body["error"]).To(BeAssignableToTypeOf(""))
	Expect(body["error"]).NotTo(BeEmpty())
	return body
}

// statusOf returns the HTTP status of a client error (0 for nil, -1 for transport errors).
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

func grant(action string, patterns ...string) client.Grant {
	return client.Grant{Action: action, Patterns: patterns}
}
