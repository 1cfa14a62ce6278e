package schema

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

const orderSchema = `{
  "type": "object",
  "properties": {
    "id":    {"type": "integer"},
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
    "note":  {"type": "string", "maxLength": 5}
  },
  "required": ["id"],
  "$defs": {"item": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}
}`

func TestCompileAcceptsValidSchemasAndRefusesInvalidOnes(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		ok   bool
	}{
		{"object schema with local ref", orderSchema, true},
		{"true schema", `true`, true},
		{"empty object", `{}`, true},
		{"draft-07 via embedded meta-schema", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}`, true},
		{"empty document", ``, false},
		{"not JSON", `{"type":`, false},
		{"two JSON values", `{} {}`, false},
		{"unknown type name", `{"type": "strng"}`, false},
		{"minimum not a number", `{"minimum": "3"}`, false},
		{"bad regex", `{"pattern": "("}`, false},
		{"dangling local ref", `{"$ref": "#/$defs/missing"}`, false},
		{"not a schema value", `42`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := Compile(json.RawMessage(c.doc))
			if c.ok && (err != nil || v == nil) {
				t.Fatalf("Compile = %v, want success", err)
			}
			if !c.ok && !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Compile = %v, want ErrInvalidSchema", err)
			}
		})
	}
}

func TestValidateNamesTheFirstFailingPath(t *testing.T) {
	v, err := Compile(json.RawMessage(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		payload string
		wantErr string // substring of the message; "" = valid
	}{
		{"valid", `{"id": 7, "items": [{"sku": "a"}]}`, ""},
		{"valid with extra field", `{"id": 7, "other": true}`, ""},
		{"big integer stays exact", `{"id": 123456789012345678901234567890}`, ""},
		{"wrong type", `{"id": "7"}`, "/id"},
		{"missing required", `{"items": []}`, "id"},
		{"nested failure via ref", `{"id": 1, "items": [{"sku": "a"}, {"sku": 3}]}`, "/items/1/sku"},
		{"too long", `{"id": 1, "note": "toolong"}`, "/note"},
		{"not JSON", `{"id": 1`, "not JSON"},
		{"trailing garbage", `{"id": 1} x`, "not JSON"},
		{"empty payload", ``, "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := v.Validate([]byte(c.payload))
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, ErrViolation) {
				t.Fatalf("Validate = %v, want ErrViolation", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("message %q should name %q on one line", err, c.wantErr)
			}
		})
	}
}

func TestExtremeNumbersAreViolationsNotPanics(t *testing.T) {
	for _, c := range [][2]string{
		{`{"multipleOf": 0.1}`, `1e999999999`},
		{`{"minimum": 0.5}`, `1e999999999`},
		{`{"properties": {"a": {"maximum": 3}}}`, `{"a": -1e-999999999}`},
	} {
		v, err := Compile(json.RawMessage(c[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate([]byte(c[1])); !errors.Is(err, ErrViolation) {
			t.Errorf("%s against %s: %v, want ErrViolation", c[1], c[0], err)
		}
	}
}

func TestFalseSchemaRejectsEverything(t *testing.T) {
	v, err := Compile(json.RawMessage(`false`))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate([]byte(`{}`)); !errors.Is(err, ErrViolation) {
		t.Fatalf("Validate = %v, want ErrViolation", err)
	}
}

func TestRemoteAndFileRefsAreNeverFetched(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{
		"http ref":              `{"$ref": "` + srv.URL + `/s.json"}`,
		"https ref":             `{"$ref": "https://127.0.0.1:1/s.json"}`,
		"file ref":              `{"$ref": "file://` + file + `"}`,
		"relative ref":          `{"$ref": "s.json"}`,
		"relative ref with $id": `{"$id": "` + srv.URL + `/root.json", "$ref": "s.json"}`,
		"remote meta-schema":    `{"$schema": "` + srv.URL + `/meta.json"}`,
		"nested remote ref":     `{"properties": {"a": {"$ref": "` + srv.URL + `/a.json#/x"}}}`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(doc))
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Compile = %v, want ErrInvalidSchema", err)
			}
		})
	}
	if hits.Load() != 0 {
		t.Fatalf("the schema compiler made %d HTTP requests", hits.Load())
	}
}

func TestValidatorIsSafeForConcurrentUse(t *testing.T) {
	v, err := Compile(json.RawMessage(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if v.Validate([]byte(`{"id": 1}`)) != nil || v.Validate([]byte(`{"id": "x"}`)) == nil {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d wrong verdicts under concurrency", wrong.Load())
	}
}

// FuzzCompile: any document either compiles or fails with ErrInvalidSchema; never a panic, and a
// compiled validator validates any payload without panicking.
func FuzzCompile(f *testing.F) {
	f.Add([]byte(orderSchema), []byte(`{"id": 1}`))
	f.Add([]byte(`true`), []byte(`1`))
	f.Add([]byte(`{"type": ["string", "null"], "enum": ["a", null]}`), []byte(`null`))
	f.Add([]byte(`{"$ref": "#"}`), []byte(`{}`))
	f.Add([]byte(`{"$ref": "http://example.com/x"}`), []byte(`{}`))
	f.Add([]byte(`{"pattern": "^a+$", "format": "email"}`), []byte(`"aaa"`))
	f.Add([]byte(`{"allOf": [{"minimum": 1}, {"maximum": 1e308}], "multipleOf": 0.1}`), []byte(`1.5`))
	f.Add([]byte(`{"$defs": {"a": {"$dynamicAnchor": "x"}}, "$dynamicRef": "#x"}`), []byte(`[]`))
	f.Add([]byte(`{"multipleOf": 1e-99999, "minimum": 1e99999999}`), []byte(`1e999999999`))
	f.Fuzz(func(t *testing.T, doc, payload []byte) {
		v, err := Compile(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("Compile error %v does not wrap ErrInvalidSchema", err)
			}
			return
		}
		if err := v.Validate(payload); err != nil && !errors.Is(err, ErrViolation) {
			t.Fatalf("Validate error %v does not wrap ErrViolation", err)
		}
	})
}
