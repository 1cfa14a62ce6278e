package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A schema whose in-place references lead back to the same subschema would fail every
// payload; it is refused when compiled. Recursion that descends into the instance is fine.
func TestCompileRefusesInPlaceRefCycles(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		cycle bool
	}{
		{"self ref at root", `{"$ref":"#"}`, true},
		{"two defs", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, true},
		{"through allOf", `{"$defs":{"a":{"allOf":[{"type":"object"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, true},
		{"hidden under a property", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`, true},
		{"unreferenced def", `{"type":"object","$defs":{"a":{"not":{"$ref":"#/$defs/a"}}}}`, false},
		{"tree through properties", `{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}`, false},
		{"linked list through a def", `{"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}},"$ref":"#/$defs/node"}`, false},
		{"shared def twice", `{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}],"$defs":{"a":{"type":"object"}}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(c.doc))
			switch {
			case c.cycle && (!errors.Is(err, ErrInvalidSchema) || !strings.Contains(err.Error(), "$ref cycle")):
				t.Fatalf("Compile = %v, want an invalid-schema error naming the $ref cycle", err)
			case !c.cycle && err != nil:
				t.Fatalf("Compile = %v, want success", err)
			}
		})
	}
}

// A schema stored by an older release (never checked for cycles) still loads, so its topic
// keeps answering payloads (400) rather than failing to load the schema.
func TestStoredCyclicSchemaStillLoads(t *testing.T) {
	v, err := compileStored(json.RawMessage(`{"$ref":"#"}`))
	if err != nil {
		t.Fatalf("compileStored = %v", err)
	}
	if err := v.Validate([]byte(`{}`)); !errors.Is(err, ErrViolation) {
		t.Fatalf("Validate = %v, want a violation", err)
	}
}
