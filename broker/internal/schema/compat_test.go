package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCompatibilityIsAdditiveOnly(t *testing.T) {
	base := `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}},"required":["id"]}`
	cases := []struct {
		name     string
		old, new string
		wantPath string // "" = compatible; else a substring of the error's pointer
	}{
		{"identical", base, base, ""},
		{"annotations only", base, `{"title":"T","description":"d","type":"object","properties":{"id":{"type":"integer","default":1},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}},"required":["id"]}`, ""},
		{"add optional property", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]},"extra":{"type":"boolean"}},"required":["id"]}`, ""},
		{"drop a required entry", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}}}`, ""},
		{"widen type with null", base, `{"type":"object","properties":{"id":{"type":["integer","null"]},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}},"required":["id"]}`, ""},
		{"integer to number", base, `{"type":"object","properties":{"id":{"type":"number"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}},"required":["id"]}`, ""},
		{"grow enum", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b","c"]}},"required":["id"]}`, ""},
		{"drop enum", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{}},"required":["id"]}`, ""},
		{"loosen maxLength", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":20},"kind":{"enum":["a","b"]}},"required":["id"]}`, ""},
		{"remove maxLength", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"kind":{"enum":["a","b"]}},"required":["id"]}`, ""},
		{"equal bound written differently", `{"minimum":1}`, `{"minimum":1.0}`, ""},
		{"lower minimum", `{"minimum":5}`, `{"minimum":1e0}`, ""},
		{"anything to true", base, `true`, ""},
		{"false to anything", `false`, base, ""},
		{"additionalProperties false loosened to true", `{"additionalProperties":false}`, `{"additionalProperties":true}`, ""},
		{"additionalProperties false loosened to schema", `{"additionalProperties":false}`, `{"additionalProperties":{"type":"string"}}`, ""},
		{"add property under additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, `{"properties":{"a":{},"b":{"type":"string"}},"additionalProperties":false}`, ""},
		{"unchanged $defs and $ref", `{"$defs":{"x":{"type":"string"}},"$ref":"#/$defs/x"}`, `{"$defs":{"x":{"type":"string"}},"$ref":"#/$defs/x","title":"t"}`, ""},
		{"items loosened", `{"items":{"type":"integer"}}`, `{"items":{"type":"number"}}`, ""},

		{"remove property", base, `{"type":"object","properties":{"id":{"type":"integer"},"kind":{"enum":["a","b"]}},"required":["id"]}`, "/properties/name"},
		{"change property type", base, `{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}},"required":["id"]}`, "/properties/id/type"},
		{"number to integer", `{"type":"number"}`, `{"type":"integer"}`, "/type"},
		{"new required property", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a","b"]}},"required":["id","name"]}`, "/required"},
		{"narrow enum", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":10},"kind":{"enum":["a"]}},"required":["id"]}`, "/properties/kind/enum"},
		{"add enum", `{"type":"string"}`, `{"type":"string","enum":["a"]}`, "/enum"},
		{"tighten maxLength", base, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":5},"kind":{"enum":["a","b"]}},"required":["id"]}`, "/properties/name/maxLength"},
		{"add minimum", `{"type":"integer"}`, `{"type":"integer","minimum":0}`, "/minimum"},
		{"raise minimum", `{"minimum":0}`, `{"minimum":1}`, "/minimum"},
		{"tighten additionalProperties to false", `{"properties":{"a":{}}}`, `{"properties":{"a":{}},"additionalProperties":false}`, "/additionalProperties"},
		{"tighten additionalProperties to schema", `{"properties":{"a":{}}}`, `{"properties":{"a":{}},"additionalProperties":{"type":"string"}}`, "/additionalProperties"},
		{"tighten additionalProperties schema", `{"additionalProperties":{"type":["string","null"]}}`, `{"additionalProperties":{"type":"string"}}`, "/additionalProperties/type"},
		{"new property narrower than old additionalProperties", `{"additionalProperties":{"type":"string"}}`, `{"properties":{"b":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, "/properties/b"},
		{"add type to unconstrained property", `{"properties":{"a":true}}`, `{"properties":{"a":{"type":"string"}}}`, "/properties/a/type"},
		{"add type at root", `{}`, `{"type":"object"}`, "/type"},
		{"anything to false", `{"type":"string"}`, `false`, "/"},
		{"add pattern", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, "/pattern"},
		{"change format", `{"format":"email"}`, `{"format":"uri"}`, "/format"},
		{"add const", `{}`, `{"const":1}`, "/const"},
		{"add uniqueItems", `{"type":"array"}`, `{"type":"array","uniqueItems":true}`, "/uniqueItems"},
		{"change $defs", `{"$defs":{"x":{"type":"string"}},"$ref":"#/$defs/x"}`, `{"$defs":{"x":{"type":"integer"}},"$ref":"#/$defs/x"}`, "/$defs"},
		{"add allOf", `{}`, `{"allOf":[{"type":"string"}]}`, "/allOf"},
		{"change draft", `{"$schema":"https://json-schema.org/draft/2020-12/schema"}`, `{"$schema":"http://json-schema.org/draft-07/schema#"}`, "/$schema"},
		{"items narrowed", `{"items":{"type":"number"}}`, `{"items":{"type":"integer"}}`, "/items/type"},
		{"items added", `{"type":"array"}`, `{"type":"array","items":{"type":"string"}}`, "/items"},
		{"escaped pointer", `{"properties":{"a/b":{"type":"string"}}}`, `{"properties":{"a/b":{"type":"integer"}}}`, "/properties/a~1b/type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckCompatible(json.RawMessage(c.old), json.RawMessage(c.new))
			if c.wantPath == "" {
				if err != nil {
					t.Fatalf("CheckCompatible = %v, want compatible", err)
				}
				return
			}
			if !errors.Is(err, ErrIncompatible) {
				t.Fatalf("CheckCompatible = %v, want ErrIncompatible", err)
			}
			if !strings.Contains(err.Error(), "at "+c.wantPath) {
				t.Fatalf("error %q does not point at %s", err, c.wantPath)
			}
		})
	}
}

func TestCompatibilityNeedsTwoValidSchemas(t *testing.T) {
	if err := CheckCompatible(json.RawMessage(`{}`), json.RawMessage(`{"type":7}`)); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("invalid new schema: %v, want ErrInvalidSchema", err)
	}
	if err := CheckCompatible(json.RawMessage(`nope`), json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("invalid old schema: %v, want ErrInvalidSchema", err)
	}
}

// FuzzCheckCompatible: never a panic, every error wraps a sentinel, and any valid schema is
// compatible with itself.
func FuzzCheckCompatible(f *testing.F) {
	f.Add([]byte(orderSchema), []byte(orderSchema))
	f.Add([]byte(`{"type":"object","properties":{"a":{"enum":[1,2.0]}}}`), []byte(`{"type":"object","properties":{"a":{"enum":[1.0,2]}}}`))
	f.Add([]byte(`{"additionalProperties":{"type":"string"}}`), []byte(`{"properties":{"b":{}},"additionalProperties":{}}`))
	f.Add([]byte(`{"items":[{"type":"string"}]}`), []byte(`{"items":{"minimum":1e400}}`))
	f.Add([]byte(`true`), []byte(`false`))
	f.Fuzz(func(t *testing.T, oldDoc, newDoc []byte) {
		err := CheckCompatible(oldDoc, newDoc)
		if err != nil && !errors.Is(err, ErrIncompatible) && !errors.Is(err, ErrInvalidSchema) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		if _, cerr := Compile(oldDoc); cerr == nil {
			if err := CheckCompatible(oldDoc, oldDoc); err != nil {
				t.Fatalf("schema incompatible with itself: %v", err)
			}
		}
	})
}
