package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// openAPIOperation is the part of an OpenAPI operation these tests read.
type openAPIOperation struct {
	Security  *[]map[string][]string     `json:"security"`
	Responses map[string]json.RawMessage `json:"responses"`
}

// openAPIOperations returns the embedded document's operations keyed as the router's
// patterns are: "GET /v1/topics/{topic}".
func openAPIOperations(t *testing.T) map[string]openAPIOperation {
	t.Helper()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	ops := map[string]openAPIOperation{}
	for path, item := range doc.Paths {
		for key, raw := range item {
			if !slices.Contains(methods, key) {
				continue
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", key, path, err)
			}
			ops[strings.ToUpper(key)+" "+path] = op
		}
	}
	return ops
}

// allRoutesEnv is a handler with every optional route mounted (metrics and the cluster
// endpoints), as the broker process builds it.
func allRoutesEnv(t *testing.T) *testEnv {
	return newEnv(t, func(o *Options) { o.Cluster = &fakeCluster{} })
}

func TestOpenAPIDocumentNamesExactlyTheRoutesTheRouterServes(t *testing.T) {
	served := allRoutesEnv(t).h.(*server).patterns
	ops := openAPIOperations(t)
	for _, p := range served {
		if _, ok := ops[p]; !ok {
			t.Errorf("the router serves %q; docs/openapi.json does not describe it", p)
		}
	}
	for p := range ops {
		if !slices.Contains(served, p) {
			t.Errorf("docs/openapi.json describes %q; the router does not serve it", p)
		}
	}
	if len(served) == 0 {
		t.Fatal("no route recorded")
	}
}

// An operation needs no credentials in the document exactly when exemptFromAuth lets it
// through; the others document the authentication failures (401, 429, and 500 for a
// credential store failure).
func TestOpenAPISecurityMatchesTheAuthenticationExemptions(t *testing.T) {
	for key, op := range openAPIOperations(t) {
		method, path, _ := strings.Cut(key, " ")
		exempt := exemptFromAuth(httptest.NewRequest(method, path, nil))
		open := op.Security != nil && len(*op.Security) == 0
		if exempt != open {
			t.Errorf("%s: exempt from authentication %v, document says open %v", key, exempt, open)
		}
		if exempt {
			continue
		}
		for _, code := range []string{"401", "429", "500"} {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("%s: authenticated route does not document %s", key, code)
			}
		}
	}
}

func TestOpenAPIServedWithoutCredentials(t *testing.T) {
	env := allRoutesEnv(t)
	rec := env.do(http.MethodGet, openAPIPath, "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s without credentials: %d %s", openAPIPath, rec.Code, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), openAPIDocument) {
		t.Fatal("served body differs from the embedded document")
	}
	// Only the read is open: any other method still needs credentials first.
	expectStatus(t, env.do(http.MethodPost, openAPIPath, "", nil), http.StatusUnauthorized)
	expectStatus(t, env.do(http.MethodPost, openAPIPath, "bob", nil), http.StatusMethodNotAllowed)
}

func TestOpenAPIDocsCopyIsIdentical(t *testing.T) {
	docs, err := os.ReadFile("../../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, openAPIDocument) {
		t.Fatal("docs/openapi.json differs from broker/internal/api/openapi.json (the source): " +
			"cp broker/internal/api/openapi.json docs/openapi.json")
	}
}
