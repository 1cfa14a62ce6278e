// Package schema validates produce payloads against a topic's JSON Schema and decides whether a
// new schema version may replace the current one (docs/internals/http-api.md §2.2 `schema`, §2.5).
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema/v6 (default draft 2020-12).
// Compilation never touches the network or the file system: only the embedded JSON Schema
// meta-schemas and references inside the document itself resolve; any other $ref (http, https,
// file, urn, …) fails compilation.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"narad.dev/broker/internal/errcode"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrInvalidSchema: the document is not JSON or not a valid JSON Schema (400).
	ErrInvalidSchema = errcode.Sub("invalid schema", errcode.ErrInvalid)
	// ErrViolation: a payload is not JSON or does not satisfy the schema (400).
	ErrViolation = errcode.Sub("schema violation", errcode.ErrInvalid)
	// ErrIncompatible: a new schema version is not backward compatible with the old (400).
	ErrIncompatible = errcode.Sub("schema not backward compatible", errcode.ErrInvalid)
)

// resourceURL is the base location the document is registered under. It only names the root
// for reference resolution; nothing is ever loaded from it.
const resourceURL = "narad:///topic-schema.json"

// Validator is one compiled schema. It is immutable and safe for concurrent use.
type Validator struct {
	sch *jsonschema.Schema
}

// refusingLoader is the compiler's only loader: every external reference is refused.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q refused: schemas must be self-contained", url)
}

// Compile parses and compiles a new JSON Schema document (topic create, schema change). Any
// failure, including a panic inside the schema library and an in-place $ref cycle
// (checkRefCycles), is an error wrapping ErrInvalidSchema.
func Compile(doc json.RawMessage) (*Validator, error) { return compile(doc, true) }

// compileStored compiles a document already accepted and stored. It skips the $ref cycle
// check, which older releases did not make: a stored cyclic schema keeps refusing payloads
// with a 400 as before instead of failing to load.
func compileStored(doc json.RawMessage) (*Validator, error) { return compile(doc, false) }

func compile(doc json.RawMessage, checkCycles bool) (v *Validator, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%w: schema compiler failed: %v", ErrInvalidSchema, r)
		}
	}()
	parsed, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(resourceURL, parsed); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	sch, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSchema, describeCompileError(err))
	}
	if err := checkRefCycles(sch); checkCycles && err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return &Validator{sch: sch}, nil
}

// Validate checks payload: it must be one JSON value satisfying the schema. A failure wraps
// ErrViolation and names the first failing instance location, e.g.
// "schema violation: at '/age': got string, want integer".
func (v *Validator) Validate(payload []byte) (err error) {
	defer func() {
		// The schema library dereferences nil on numbers beyond big.Float range (e.g. 1e999999999
		// against minimum or multipleOf); such a payload is refused, never a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: payload could not be validated (number out of range?)", ErrViolation)
		}
	}()
	inst, err := decode(payload)
	if err != nil {
		return fmt.Errorf("%w: payload is not JSON: %v", ErrViolation, err)
	}
	err = v.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w: %s", ErrViolation, firstLeaf(ve))
	}
	return fmt.Errorf("%w: %s", ErrViolation, oneLine(err.Error()))
}

// describeCompileError renders a compile failure on one line; a meta-schema violation names the
// first offending location in the schema document.
func describeCompileError(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		return "not a valid JSON Schema: " + firstLeaf(ve)
	}
	return oneLine(err.Error())
}

// decode parses exactly one JSON value, keeping numbers exact (json.Number).
func decode(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("empty document")
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// firstLeaf follows the first cause down to a leaf error and renders it on one line.
func firstLeaf(ve *jsonschema.ValidationError) string {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return oneLine(ve.Error())
}

// oneLine keeps the first line of a multi-line library message, bounded in length.
func oneLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
