// Package openapi_test holds a real narad node to its own API description: it fetches
// /v1/openapi.json from the node, loads and validates the document with kin-openapi, then
// calls every operation with good and bad input and checks that each answer's status is
// documented for its operation and its body matches that response's schema
// (docs/internals/http-api.md §2.23).
package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestOpenAPI(t *testing.T) {
	suite.Run(t, "the OpenAPI document against a running node")
}

const rootPassword = "root-Secret-1"

var (
	node   *harness.Node
	doc    *openapi3.T
	router routers.Router
	// seen counts the validated answers per operation ("GET /v1/topics") and status.
	seen = map[string]map[int]int{}
)

var _ = BeforeSuite(func() {
	var err error
	// The cluster secret lets a remote link keep its password (sealed): the remote attach
	// below links the node to one of its own topics.
	node, err = harness.NewNode(harness.Options{ID: "n1", AdminPassword: rootPassword,
		Env: []string{"NARAD_CLUSTER_SECRET=oa-cluster-secret"}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(node.Cleanup)
	Expect(node.StartReady()).To(Succeed())

	resp, err := http.Get(node.URL() + "/v1/openapi.json") // no credentials: the document is public
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())

	doc, err = openapi3.NewLoader().LoadFromData(body)
	Expect(err).NotTo(HaveOccurred())
	Expect(doc.IsOpenAPI31OrLater()).To(BeTrue(), "openapi = %s", doc.OpenAPI)
	Expect(doc.Validate(context.Background())).To(Succeed())
	strictResponses(doc)
	router, err = gorillamux.NewRouter(doc)
	Expect(err).NotTo(HaveOccurred())

	// What more than one spec uses, so that any spec runs on its own (-ginkgo.focus).
	_, a := send(admin, "POST", "/v1/users", mustJSON(map[string]any{"username": reader.user, "password": reader.pass}))
	Expect(a.status).To(Equal(http.StatusCreated), "%s", a.body)
	_, a = send(admin, "POST", "/v1/topics", []byte(`{"name":"oa-orders","partitions":3}`))
	Expect(a.status).To(Equal(http.StatusCreated), "%s", a.body)
})

// strictResponses makes the response schemas of doc refuse the properties they do not
// declare (unevaluatedProperties: false), so that a field the broker sends and the document
// leaves out fails the suite. Clients must ignore unknown fields (the document says so); the
// suite must not. Schemas used as allOf members stay open: a composed schema is held strict
// at its top, where JSON Schema 2020-12 sees the properties of all its members.
func strictResponses(doc *openapi3.T) {
	members := map[*openapi3.Schema]bool{}
	var schemas []*openapi3.Schema
	seen := map[*openapi3.Schema]bool{}
	var walk func(r *openapi3.SchemaRef)
	walk = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		s := r.Value
		seen[s] = true
		schemas = append(schemas, s)
		for _, m := range s.AllOf {
			members[m.Value] = true
			walk(m)
		}
		for _, m := range append(s.OneOf, s.AnyOf...) {
			walk(m)
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
	closed := false
	for _, s := range schemas {
		open := s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil
		if !members[s] && !open && (len(s.Properties) > 0 || len(s.AllOf) > 0) {
			s.UnevaluatedProperties = openapi3.BoolSchema{Has: &closed}
		}
	}
}

// creds are Basic credentials; the zero value sends none.
type creds struct{ user, pass string }

var (
	admin  = creds{"admin", rootPassword}
	reader = creds{"oa-reader", "reader-pw-1"} // a user without grants
	anon   = creds{}
)

// answer is one response, its body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a map (an error body, or an object answer).
func (a answer) json() map[string]any {
	GinkgoHelper()
	var m map[string]any
	Expect(json.Unmarshal(a.body, &m)).To(Succeed(), "body %q", a.body)
	return m
}

// call sends one request, expects status want and validates the answer against the document:
// the route must be described, the status documented for its operation, the headers and the
// body valid for that response; an accepted request (2xx) must also be valid for the
// operation.
func call(c creds, method, path string, body []byte, want int) answer {
	GinkgoHelper()
	req, a := send(c, method, path, body)
	Expect(a.status).To(Equal(want), "%s %s: body %s", method, path, a.body)
	validate(req, body, a)
	return a
}

// send sends one request and reads the answer.
func send(c creds, method, path string, body []byte) (*http.Request, answer) {
	GinkgoHelper()
	req, err := http.NewRequest(method, node.URL()+path, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	ct := "application/json"
	if strings.HasSuffix(req.URL.Path, "/produce") {
		ct = "application/octet-stream"
	}
	if body != nil {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return req, answer{status: resp.StatusCode, header: resp.Header, body: got}
}

// validate checks a against the document (see call).
func validate(req *http.Request, body []byte, a answer) {
	GinkgoHelper()
	route, params, err := router.FindRoute(req)
	Expect(err).NotTo(HaveOccurred(), "%s %s is not described", req.Method, req.URL.Path)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	ctx := context.Background()
	if a.status < 300 {
		req.Body = io.NopCloser(bytes.NewReader(body))
		Expect(openapi3filter.ValidateRequest(ctx, in)).To(Succeed(),
			"%s %s was accepted (%d) but the document refuses the request", req.Method, req.URL, a.status)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: a.status, Header: a.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(a.body)
	Expect(openapi3filter.ValidateResponse(ctx, out)).To(Succeed(),
		"%s %s answered %d %s", req.Method, req.URL, a.status, a.body)
	if a.status >= 400 {
		Expect(a.header.Get("Content-Type")).To(Equal("application/json"))
		Expect(a.json()).To(HaveKeyWithValue("error", Not(BeEmpty())))
	}
	key := req.Method + " " + route.Path
	if seen[key] == nil {
		seen[key] = map[int]int{}
	}
	seen[key][a.status]++
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return b
}

var _ = Describe("the API description served at /v1/openapi.json", Ordered, func() {
	It("describes the probes, metrics and itself, open to anyone", func() {
		call(anon, "GET", "/healthz", nil, 200)
		call(anon, "GET", "/readyz", nil, 200)
		call(anon, "GET", "/metrics", nil, 200)
		call(anon, "GET", "/v1/openapi.json", nil, 200)
	})

	It("describes user management, refusals included", func() {
		call(admin, "POST", "/v1/users", mustJSON(map[string]any{"username": reader.user, "password": "x"}), 409)
		call(admin, "POST", "/v1/users", []byte(`{"username":"bad name","password":"p"}`), 400)
		call(admin, "POST", "/v1/users", []byte(`{"username":"u1","password":"p","extra":1}`), 400)
		call(reader, "POST", "/v1/users", []byte(`{"username":"u2","password":"p"}`), 403)
		call(anon, "POST", "/v1/users", []byte(`{}`), 401)
		call(admin, "GET", "/v1/users", nil, 200)
		call(reader, "GET", "/v1/users", nil, 403)
		call(admin, "GET", "/v1/users/"+reader.user, nil, 200)
		call(admin, "GET", "/v1/users/oa-ghost", nil, 404)
		call(admin, "PUT", "/v1/users/"+reader.user+"/grants", []byte(`{"grants":[]}`), 200)
		call(admin, "PUT", "/v1/users/"+reader.user+"/grants", []byte(`{"grants":[{"action":"fly"}]}`), 400)
		call(admin, "PUT", "/v1/users/oa-ghost/grants", []byte(`{"grants":[]}`), 404)
		call(admin, "PUT", "/v1/users/admin/grants", []byte(`{"grants":[]}`), 403)
		call(admin, "PUT", "/v1/users/"+reader.user+"/password", mustJSON(map[string]any{"new_password": reader.pass}), 204)
		call(admin, "PUT", "/v1/users/"+reader.user+"/password", []byte(`{"new_password":""}`), 400)
		call(admin, "PUT", "/v1/users/oa-ghost/password", []byte(`{"new_password":"p"}`), 404)
		call(admin, "POST", "/v1/users", []byte(`{"username":"oa-temp","password":"temp-pw"}`), 201)
		call(admin, "DELETE", "/v1/users/oa-temp", nil, 204)
		call(admin, "DELETE", "/v1/users/oa-temp", nil, 404)
		call(admin, "DELETE", "/v1/users/admin", nil, 403)
	})

	It("describes the failed-login throttle", func() {
		bad := creds{"oa-throttled", "wrong"}
		for range 5 {
			call(bad, "GET", "/v1/topics", nil, 401)
		}
		a := call(bad, "GET", "/v1/topics", nil, 429)
		Expect(a.header.Get("Retry-After")).NotTo(BeEmpty())
	})

	It("describes creating, listing, describing and altering topics", func() {
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-t1","partitions":3}`), 201)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-t1"}`), 409)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"bad name"}`), 400)
		call(admin, "POST", "/v1/topics", []byte(`{"nme":"x"}`), 400)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-c","parent":"oa-missing"}`), 404)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-r3","replication_factor":3}`), 422)
		big := mustJSON(map[string]any{"name": "oa-big", "schema": map[string]any{"description": strings.Repeat("x", 1<<20)}})
		call(admin, "POST", "/v1/topics", big, 413)
		call(reader, "POST", "/v1/topics", []byte(`{"name":"oa-x"}`), 403)
		call(anon, "POST", "/v1/topics", []byte(`{"name":"oa-x"}`), 401)

		call(admin, "GET", "/v1/topics", nil, 200)
		call(admin, "GET", "/v1/topics?limit=1", nil, 200)
		call(admin, "GET", "/v1/topics?limit=0", nil, 400)
		call(admin, "GET", "/v1/topics/oa-t1", nil, 200)
		call(admin, "GET", "/v1/topics/oa-t1?partition=1", nil, 200)
		call(admin, "GET", "/v1/topics/oa-t1?partition=7", nil, 400)
		call(admin, "GET", "/v1/topics/oa-missing", nil, 404)

		call(admin, "PATCH", "/v1/topics/oa-t1", []byte(`{"retention_ms":0,"partitions":4}`), 200)
		call(admin, "PATCH", "/v1/topics/oa-t1", []byte(`{}`), 400)
		call(admin, "PATCH", "/v1/topics/oa-t1", []byte(`{"partitions":3}`), 400)
		call(admin, "PATCH", "/v1/topics/oa-t1", []byte(`{"replication_factor":2}`), 409)
		call(admin, "PATCH", "/v1/topics/oa-missing", []byte(`{"retention_ms":0}`), 404)
		call(reader, "PATCH", "/v1/topics/oa-t1", []byte(`{"retention_ms":0}`), 403)
	})

	It("describes produce, consume, replay and ack", func() {
		call(admin, "POST", "/v1/topics/oa-orders/produce?key=k1&partition=0", []byte("hello"), 202)
		call(admin, "POST", "/v1/topics/oa-orders/produce?partition=0", []byte(`{"id":2}`), 202)
		call(admin, "POST", "/v1/topics/oa-orders/produce", []byte{}, 400)
		call(admin, "POST", "/v1/topics/oa-orders/produce?partition=9", []byte("x"), 400)
		call(admin, "POST", "/v1/topics/oa-orders/produce", bytes.Repeat([]byte("x"), 1<<20+1), 413)
		call(admin, "POST", "/v1/topics/oa-missing/produce", []byte("x"), 404)
		call(reader, "POST", "/v1/topics/oa-orders/produce", []byte("x"), 403)

		batch := `{"records":[{"payload":{"a":1},"partition":0},{"key":"k","payload":"text","partition":0},` +
			`{"payload":"AAEC/w==","payload_encoding":"base64","partition":0}]}`
		call(admin, "POST", "/v1/topics/oa-orders/produce/batch", []byte(batch), 202)
		call(admin, "POST", "/v1/topics/oa-orders/produce/batch", []byte(`{"records":[]}`), 400)
		call(admin, "POST", "/v1/topics/oa-orders/produce/batch", []byte(`{"records":[{"payload":null}]}`), 400)
		call(admin, "POST", "/v1/topics/oa-missing/produce/batch", []byte(`{"records":[{"payload":1}]}`), 404)
		call(reader, "POST", "/v1/topics/oa-orders/produce/batch", []byte(`{"records":[{"payload":1}]}`), 403)

		// Replay partition 0 from offset 0 once the five records are committed: read-only.
		const replay = "/v1/topics/oa-orders/consume?partition=0&offset=0&max_messages=10"
		Eventually(func() int {
			var b struct{ Messages []json.RawMessage }
			if _, a := send(admin, "GET", replay, nil); a.status == 200 {
				_ = json.Unmarshal(a.body, &b)
			}
			return len(b.Messages)
		}).WithTimeout(20 * time.Second).Should(Equal(5))
		call(admin, "GET", replay, nil, 200)
		call(admin, "GET", "/v1/topics/oa-orders/consume?partition=0&offset=0", nil, 200)
		call(admin, "GET", "/v1/topics/oa-orders/consume?partition=0&offset=1000", nil, 204)

		one := call(admin, "GET", "/v1/topics/oa-orders/consume?wait=2s", nil, 200).json()
		handle, _ := one["receipt_handle"].(string)
		Expect(handle).NotTo(BeEmpty())
		more := call(admin, "GET", "/v1/topics/oa-orders/consume?wait=2s&max_messages=10", nil, 200)
		var leased struct {
			Messages []struct {
				ReceiptHandle string `json:"receipt_handle"`
			}
		}
		Expect(json.Unmarshal(more.body, &leased)).To(Succeed())
		Expect(leased.Messages).NotTo(BeEmpty())
		call(admin, "GET", "/v1/topics/oa-orders/consume?wait=abc", nil, 400)
		call(admin, "GET", "/v1/topics/oa-orders/consume?partition=99", nil, 400)
		call(admin, "GET", "/v1/topics/oa-orders/consume?max_messages=1001", nil, 400)
		call(admin, "GET", "/v1/topics/oa-missing/consume", nil, 404)
		call(reader, "GET", "/v1/topics/oa-orders/consume", nil, 403)

		call(admin, "POST", "/v1/topics/oa-orders/ack?receipt_handle="+handle+"&extend=true", nil, 204)
		call(admin, "POST", "/v1/topics/oa-orders/ack?receipt_handle="+handle, nil, 204)
		call(admin, "POST", "/v1/topics/oa-orders/ack?receipt_handle="+handle, nil, 410)
		call(admin, "POST", "/v1/topics/oa-orders/ack?receipt_handle=garbage", nil, 400)
		call(admin, "POST", "/v1/topics/oa-orders/ack?receipt_handle=0:0:1&extend=maybe", nil, 400)
		call(admin, "POST", "/v1/topics/oa-missing/ack?receipt_handle=0:0:1", nil, 404)
		call(reader, "POST", "/v1/topics/oa-orders/ack?receipt_handle=0:0:1", nil, 403)

		acks := []map[string]any{{"receipt_handle": "0:0:1"}}
		for _, m := range leased.Messages {
			acks = append(acks, map[string]any{"receipt_handle": m.ReceiptHandle})
		}
		res := call(admin, "POST", "/v1/topics/oa-orders/ack/batch", mustJSON(map[string]any{"acks": acks}), 200)
		Expect(res.json()["results"]).To(HaveLen(len(acks)))
		call(admin, "POST", "/v1/topics/oa-orders/ack/batch", []byte(`{"acks":[]}`), 400)
		call(admin, "POST", "/v1/topics/oa-missing/ack/batch", []byte(`{"acks":[{"receipt_handle":"0:0:1"}]}`), 404)
		call(reader, "POST", "/v1/topics/oa-orders/ack/batch", []byte(`{"acks":[{"receipt_handle":"0:0:1"}]}`), 403)
	})

	It("describes fan-out children and deleting a parent", func() {
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-parent"}`), 201)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-delayed","parent":"oa-parent","fanout_delay_ms":60000}`), 201)
		call(admin, "POST", "/v1/topics/oa-delayed/produce", []byte("x"), 409)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-kid"}`), 201)

		call(admin, "POST", "/v1/topics/oa-parent/children", []byte(`{"child":"oa-kid"}`), 200)
		call(admin, "POST", "/v1/topics/oa-parent/children", []byte(`{"child":"oa-kid"}`), 409)
		call(admin, "POST", "/v1/topics/oa-parent/children", []byte(`{"child":"oa-missing"}`), 404)
		call(admin, "POST", "/v1/topics/oa-parent/children", []byte(`{}`), 400)
		call(admin, "POST", "/v1/topics", []byte(`{"name":"oa-far"}`), 201)
		remote := func(url string) []byte {
			return mustJSON(map[string]any{"remote": map[string]any{"url": url, "topic": "oa-far",
				"user": admin.user, "password": admin.pass}})
		}
		call(admin, "POST", "/v1/topics/oa-parent/children", remote(node.URL()), 200)
		call(admin, "POST", "/v1/topics/oa-parent/children", remote("http://127.0.0.1:1"), 422)
		call(reader, "POST", "/v1/topics/oa-parent/children", []byte(`{"child":"oa-kid"}`), 403)
		call(admin, "GET", "/v1/topics/oa-parent/children", nil, 200)
		call(admin, "GET", "/v1/topics/oa-missing/children", nil, 404)

		call(reader, "DELETE", "/v1/topics/oa-parent/children/oa-kid", nil, 403)
		call(admin, "DELETE", "/v1/topics/oa-parent/children/oa-kid", nil, 204)
		call(admin, "DELETE", "/v1/topics/oa-parent/children/oa-kid", nil, 404)

		call(reader, "DELETE", "/v1/topics/oa-kid", nil, 403)
		call(admin, "DELETE", "/v1/topics/oa-kid", nil, 204)
		call(admin, "DELETE", "/v1/topics/oa-kid", nil, 404)
		call(admin, "DELETE", "/v1/topics/oa-parent", nil, 409)
		call(admin, "DELETE", "/v1/topics/oa-parent?detach_children=maybe", nil, 400)
		call(admin, "DELETE", "/v1/topics/oa-parent?detach_children=true", nil, 200)
	})

	It("describes the cluster endpoints", func() {
		call(admin, "GET", "/v1/cluster/members", nil, 200)
		call(anon, "GET", "/v1/cluster/members", nil, 401)
		call(admin, "POST", "/v1/cluster/members/n1/decommission?dry_run=true", nil, 200)
		call(admin, "POST", "/v1/cluster/members/n1/decommission?dry_run=maybe", nil, 400)
		call(admin, "POST", "/v1/cluster/members/n1/decommission", []byte(`{"force":"yes"}`), 400)
		call(admin, "POST", "/v1/cluster/members/n1/decommission", []byte(`{"force":true}`), 409)
		call(admin, "POST", "/v1/cluster/members/oa-ghost/decommission?dry_run=true", nil, 404)
		call(reader, "POST", "/v1/cluster/members/n1/decommission?dry_run=true", nil, 403)
		call(admin, "DELETE", "/v1/cluster/members/n1/decommission", nil, 204)
		call(admin, "DELETE", "/v1/cluster/members/oa-ghost/decommission", nil, 404)
		call(reader, "DELETE", "/v1/cluster/members/n1/decommission", nil, 403)

		call(admin, "GET", "/v1/cluster/moves", nil, 200)
		call(admin, "GET", "/v1/cluster/moves?detail=true", nil, 200)
		call(admin, "GET", "/v1/cluster/moves?detail=maybe", nil, 400)
		call(admin, "POST", "/v1/cluster/moves/oa-orders/0/abort", nil, 409)
		call(admin, "POST", "/v1/cluster/moves/oa-missing/0/abort", nil, 404)
		call(admin, "POST", "/v1/cluster/moves/oa-orders/x/abort", nil, 400)
		call(reader, "POST", "/v1/cluster/moves/oa-orders/0/abort", nil, 403)

		call(admin, "GET", "/v1/cluster/partitions", nil, 200)
		call(admin, "GET", "/v1/cluster/partitions?under_replicated=true&limit=2", nil, 200)
		call(admin, "GET", "/v1/cluster/partitions?limit=0", nil, 400)

		call(admin, "POST", "/v1/cluster/elect-leaders", nil, 200)
		call(admin, "POST", "/v1/cluster/elect-leaders", []byte(`{"preferred":true,"topic":"oa-orders"}`), 200)
		call(admin, "POST", "/v1/cluster/elect-leaders", []byte(`{"partition":1}`), 400)
		call(admin, "POST", "/v1/cluster/elect-leaders", []byte(`{"topic":"oa-missing"}`), 404)
		call(reader, "POST", "/v1/cluster/elect-leaders", nil, 403)
	})

	It("exercised every operation of the document", func() {
		if cfg, _ := GinkgoConfiguration(); len(cfg.FocusStrings) > 0 || len(cfg.SkipStrings) > 0 {
			Skip("only some specs ran")
		}
		var missing []string
		for path, item := range doc.Paths.Map() {
			for method := range item.Operations() {
				if key := method + " " + path; seen[key] == nil {
					missing = append(missing, key)
				}
			}
		}
		slices.Sort(missing)
		Expect(missing).To(BeEmpty(), "operations no spec called: %s", fmt.Sprint(missing))
	})
})
