package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// CheckCompatible decides whether newDoc may replace oldDoc as a topic's schema: "backward
// compatible (additive only)" (docs/internals/http-api.md §2.5). Both documents must compile (else
// ErrInvalidSchema). The check is structural and conservative: what it cannot prove additive it
// refuses with an error wrapping ErrIncompatible that names the JSON pointer of the offending
// keyword.
//
// Two (sub)schemas O (old) and N (new) are compatible when:
//
//   - Boolean schemas: N is true (or has only annotations) → compatible; O is false →
//     compatible; N false otherwise → incompatible; O true is read as the empty object {}.
//   - Annotations ($comment, title, description, default, examples, deprecated, readOnly,
//     writeOnly, $anchor) are ignored.
//   - type: N's set of types contains every type of O ("integer" is inside "number"); an
//     absent type means all types.
//   - properties: every property of O is still in N, and its subschemas are compatible. N may
//     add properties. When O's additionalProperties is a schema S (not absent/true/false), an
//     added property's schema must be compatible with S, because O validated that key with S.
//   - required: N requires nothing O did not require (fewer is fine).
//   - additionalProperties: not tightened. Absent/true in O → absent/true in N; a schema in O
//     → absent/true in N or a compatible schema; false in O → anything.
//   - items (a single schema): compatible subschemas; absent in O → absent/true in N.
//   - enum: N's values include every value of O (absent enum in N is fine; adding one is not).
//     const: equal or removed.
//   - Bounds may only loosen or go: minimum, exclusiveMinimum, minLength, minItems,
//     minProperties must not grow (nor appear); maximum, exclusiveMaximum, maxLength, maxItems,
//     maxProperties must not shrink (nor appear).
//   - pattern, format, multipleOf, uniqueItems: unchanged or removed (uniqueItems may also become
//     false).
//   - Every other keyword ($ref, $defs, allOf, anyOf, oneOf, not, if/then/else,
//     patternProperties, prefixItems, contains, dependentRequired, unevaluated*, $schema, $id,
//     …) must be deep-equal in O and N, since its effect cannot be compared structurally.
//
// Numbers compare by value (1 and 1.0 are equal in bounds and enums).
func CheckCompatible(oldDoc, newDoc json.RawMessage) error {
	if _, err := compileStored(oldDoc); err != nil {
		return fmt.Errorf("old schema: %w", err)
	}
	if _, err := Compile(newDoc); err != nil {
		return fmt.Errorf("new schema: %w", err)
	}
	o, _ := decode(oldDoc) // both decoded fine inside Compile
	n, _ := decode(newDoc)
	return compat("", o, n)
}

func incompatible(path, format string, args ...any) error {
	if path == "" {
		path = "/"
	}
	return fmt.Errorf("%w: at %s: %s", ErrIncompatible, path, fmt.Sprintf(format, args...))
}

// annotations never change what validates.
var annotations = map[string]bool{
	"$comment": true, "title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "$anchor": true,
}

// lowerBounds may only shrink, upperBounds only grow.
var (
	lowerBounds = []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"}
	upperBounds = []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"}
	// equalOrGone may be removed but not added or changed.
	equalOrGone = []string{"pattern", "format", "multipleOf", "const"}
)

// handled are the keywords with a rule of their own; the rest must be deep-equal.
var handled = func() map[string]bool {
	m := map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
		"items": true, "enum": true, "uniqueItems": true}
	for _, k := range slices.Concat(lowerBounds, upperBounds, equalOrGone) {
		m[k] = true
	}
	return m
}()

// asObject turns a schema value into its keyword map: true → {}, false → nil, ok=false.
func asObject(v any) (map[string]any, bool) {
	switch s := v.(type) {
	case bool:
		if s {
			return map[string]any{}, true
		}
		return nil, false
	case map[string]any:
		return s, true
	}
	return nil, false
}

// unconstrained reports whether a schema object has no keyword besides annotations.
func unconstrained(m map[string]any) bool {
	for k := range m {
		if !annotations[k] {
			return false
		}
	}
	return true
}

func compat(path string, oldV, newV any) error {
	om, oldOK := asObject(oldV)
	nm, newOK := asObject(newV)
	switch {
	case newOK && unconstrained(nm):
		return nil // N accepts everything
	case oldV == false:
		return nil // O accepted nothing
	case !newOK:
		return incompatible(path, "schema became false")
	case !oldOK:
		return incompatible(path, "not a schema")
	}
	if err := compatTypes(path, om, nm); err != nil {
		return err
	}
	if err := compatObject(path, om, nm); err != nil {
		return err
	}
	if err := compatItems(path, om, nm); err != nil {
		return err
	}
	if err := compatValues(path, om, nm); err != nil {
		return err
	}
	if err := compatBounds(path, om, nm); err != nil {
		return err
	}
	keys := make([]string, 0, len(om)+len(nm))
	for k := range om {
		keys = append(keys, k)
	}
	for k := range nm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range slices.Compact(keys) {
		if handled[k] || annotations[k] {
			continue
		}
		if !jsonEqual(om[k], nm[k]) {
			return incompatible(path+"/"+escape(k), "keyword %q changed, added or removed", k)
		}
	}
	return nil
}

var allTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

func typeSet(m map[string]any) map[string]bool {
	set := map[string]bool{}
	switch t := m["type"].(type) {
	case nil:
		for _, x := range allTypes {
			set[x] = true
		}
	case string:
		set[t] = true
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				set[s] = true
			}
		}
	}
	return set
}

func compatTypes(path string, om, nm map[string]any) error {
	ot, nt := typeSet(om), typeSet(nm)
	for t := range ot {
		if nt[t] || t == "integer" && nt["number"] {
			continue
		}
		return incompatible(path+"/type", "type %q no longer allowed", t)
	}
	return nil
}

func compatObject(path string, om, nm map[string]any) error {
	oprops, _ := om["properties"].(map[string]any)
	nprops, _ := nm["properties"].(map[string]any)
	oadd, hasOAdd := om["additionalProperties"]
	nadd, hasNAdd := nm["additionalProperties"]
	for _, name := range sortedKeys(oprops) {
		nsub, ok := nprops[name]
		if !ok {
			return incompatible(path+"/properties/"+escape(name), "property %q removed", name)
		}
		if err := compat(path+"/properties/"+escape(name), oprops[name], nsub); err != nil {
			return err
		}
	}
	// A property N adds was validated by O's additionalProperties, when that was a schema.
	if oaddObj, ok := oadd.(map[string]any); ok && hasOAdd {
		for _, name := range sortedKeys(nprops) {
			if _, existed := oprops[name]; !existed {
				if err := compat(path+"/properties/"+escape(name), oaddObj, nprops[name]); err != nil {
					return err
				}
			}
		}
	}
	oldReq := stringSet(om["required"])
	for _, r := range sortedKeys(stringSet(nm["required"])) {
		if !oldReq[r] {
			return incompatible(path+"/required", "property %q became required", r)
		}
	}
	switch {
	case !hasNAdd:
		return nil
	case !hasOAdd:
		oadd = true
	}
	return compat(path+"/additionalProperties", oadd, nadd)
}

func compatItems(path string, om, nm map[string]any) error {
	ni, hasN := nm["items"]
	if !hasN {
		return nil
	}
	oi, hasO := om["items"]
	if !hasO {
		oi = true
	}
	_, oArr := oi.([]any)
	_, nArr := ni.([]any)
	if oArr || nArr { // draft-07 tuple form: compare as a whole
		if !jsonEqual(oi, ni) {
			return incompatible(path+"/items", "tuple items changed")
		}
		return nil
	}
	return compat(path+"/items", oi, ni)
}

func compatValues(path string, om, nm map[string]any) error {
	if nenum, ok := nm["enum"].([]any); ok {
		oenum, had := om["enum"].([]any)
		if !had {
			return incompatible(path+"/enum", "enum added")
		}
		for _, v := range oenum {
			if !slices.ContainsFunc(nenum, func(x any) bool { return jsonEqual(v, x) }) {
				return incompatible(path+"/enum", "enum value %s removed", render(v))
			}
		}
	}
	for _, k := range equalOrGone {
		nv, ok := nm[k]
		if ok && !jsonEqual(om[k], nv) {
			return incompatible(path+"/"+k, "%s added or changed", k)
		}
	}
	if nu, _ := nm["uniqueItems"].(bool); nu {
		if ou, _ := om["uniqueItems"].(bool); !ou {
			return incompatible(path+"/uniqueItems", "uniqueItems added")
		}
	}
	return nil
}

func compatBounds(path string, om, nm map[string]any) error {
	for _, k := range lowerBounds {
		if err := bound(path, k, om, nm, -1); err != nil {
			return err
		}
	}
	for _, k := range upperBounds {
		if err := bound(path, k, om, nm, +1); err != nil {
			return err
		}
	}
	return nil
}

// bound checks one numeric bound: dir -1 means N may not exceed O, +1 means N may not go below.
func bound(path, k string, om, nm map[string]any, dir int) error {
	nv, ok := nm[k]
	if !ok {
		return nil
	}
	ov, had := om[k]
	if !had {
		return incompatible(path+"/"+k, "%s added", k)
	}
	o, n := number(ov), number(nv)
	if o == nil || n == nil {
		if !jsonEqual(ov, nv) {
			return incompatible(path+"/"+k, "%s changed", k)
		}
		return nil
	}
	if c := n.Cmp(o); c != 0 && c != dir {
		return incompatible(path+"/"+k, "%s tightened from %s to %s", k, o.RatString(), n.RatString())
	}
	return nil
}

// number returns v as an exact rational, or nil when v is not a JSON number.
func number(v any) *big.Rat {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil
	}
	return r
}

// jsonEqual compares decoded JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ry := number(x), number(y)
		if rx == nil || ry == nil {
			return x == y
		}
		return rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func stringSet(v any) map[string]bool {
	set := map[string]bool{}
	if arr, ok := v.([]any); ok {
		for _, x := range arr {
			if s, ok := x.(string); ok {
				set[s] = true
			}
		}
	}
	return set
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// escape encodes a JSON pointer token (RFC 6901).
func escape(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return oneLine(string(b))
}
