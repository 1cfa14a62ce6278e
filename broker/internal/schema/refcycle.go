package schema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// errRefCycle names the subschema at which an in-place reference cycle closes.
type errRefCycle struct{ location string }

func (e *errRefCycle) Error() string {
	return "$ref cycle: " + oneLine(e.location) + " refers back to itself without descending into the instance"
}

// checkRefCycles refuses a schema in which a chain of in-place applicators ($ref,
// $dynamicRef, $recursiveRef, allOf, anyOf, oneOf, not, if/then/else, dependentSchemas)
// leads from a subschema back to itself: validating any instance that reaches it would
// loop at the same instance location, and the library answers every such payload with an
// error, so every later produce would fail. Recursion through properties, items and the
// like is fine (each step descends into the instance) and is allowed.
func checkRefCycles(root *jsonschema.Schema) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[*jsonschema.Schema]int{}
	// Every subschema is a start: a cycle may hide under properties/items, reached only by
	// descending.
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	queue := []*jsonschema.Schema{root}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		all = append(all, s)
		queue = append(queue, inPlace(s)...)
		queue = append(queue, descending(s)...)
	}
	// Iterative depth-first search over the in-place edges only.
	type frame struct {
		s    *jsonschema.Schema
		next []*jsonschema.Schema
	}
	for _, start := range all {
		if state[start] != unseen {
			continue
		}
		state[start] = onPath
		stack := []frame{{start, inPlace(start)}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.next) == 0 {
				state[top.s] = done
				stack = stack[:len(stack)-1]
				continue
			}
			n := top.next[0]
			top.next = top.next[1:]
			if n == nil {
				continue
			}
			switch state[n] {
			case onPath:
				return &errRefCycle{location: n.Location}
			case unseen:
				state[n] = onPath
				stack = append(stack, frame{n, inPlace(n)})
			}
		}
	}
	return nil
}

// inPlace lists the subschemas s applies to the same instance location.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if ds, ok := d.(*jsonschema.Schema); ok {
			out = append(out, ds)
		}
	}
	return out
}

// descending lists the subschemas s applies to parts of the instance.
func descending(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020,
		s.UnevaluatedItems, s.ContentSchema}
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return out
}
