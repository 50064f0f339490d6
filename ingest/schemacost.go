package ingest

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tallyhq/tally/event"
)

// Bounds on the cost of a size schema, so that validating one size costs
// bounded time and memory whatever an admin registers (docs/http-api.md,
// Size schemas: bounded cost).
const (
	// MaxSchemaDepth is the deepest nesting of subschemas (each $ref
	// followed), the document at depth 0; deeper is rule [event.RuleDepth].
	MaxSchemaDepth = 32
	// MaxSchemaCost is the most subschemas a size schema may hold once
	// every $ref is unfolded; more is rule [event.RuleSchema].
	MaxSchemaCost = 10000
	// MaxRegexLength is the longest regular expression, in bytes, of a
	// pattern, patternProperties or a string of format "regex" in a size.
	MaxRegexLength = 1024
)

// boundedRegexp is the compiler's regular-expression engine (Go's regexp,
// as the library's default) refusing an expression longer than
// MaxRegexLength bytes.
func boundedRegexp(s string) (jsonschema.Regexp, error) {
	if len(s) > MaxRegexLength {
		return nil, fmt.Errorf("longer than %d bytes, the longest regular expression judged", MaxRegexLength)
	}
	return regexp.Compile(s)
}

// Keywords of JSON Schema (draft 4 to 2020-12) whose value is one
// subschema, an object of subschemas, or an array of subschemas.
var (
	oneSchemaKeywords = map[string]bool{
		"additionalProperties": true, "propertyNames": true, "items": true, "contains": true, "not": true,
		"if": true, "then": true, "else": true, "unevaluatedItems": true, "unevaluatedProperties": true,
		"additionalItems": true, "contentSchema": true,
	}
	mapSchemaKeywords = map[string]bool{
		"properties": true, "patternProperties": true, "dependentSchemas": true, "$defs": true,
		"definitions": true, "dependencies": true,
	}
	arraySchemaKeywords = map[string]bool{
		"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true, "items": true,
	}
)

// schemaNode is one subschema of a size schema: its JSON Pointer, its
// subschemas and the pointers of the $ref and $dynamicRef keywords in it.
type schemaNode struct {
	ptr      string
	children []*schemaNode
	refs     []schemaRef
}

type schemaRef struct{ at, target string }

// checkSchemaCost refuses a size schema (already compiled, so every
// reference resolves) whose $ref graph has a cycle, that nests deeper than
// MaxSchemaDepth, or that costs more than MaxSchemaCost (see there). Each
// problem names the keyword's JSON Pointer in doc.
func checkSchemaCost(doc any) error {
	nodes := map[string]*schemaNode{}
	anchors := map[string]string{}
	ids := map[string]string{}
	root := walkSchema(doc, "", nodes, anchors, ids)
	resolve := func(ref string) (string, bool) {
		if p, ok := ids[strings.TrimSuffix(ref, "#")]; ok {
			return p, true
		}
		frag, ok := strings.CutPrefix(ref, "#")
		if !ok {
			return "", false
		}
		if frag == "" || strings.HasPrefix(frag, "/") {
			f, err := url.PathUnescape(frag)
			if err != nil {
				return "", false
			}
			_, ok := nodes[f]
			return f, ok
		}
		p, ok := anchors[frag]
		return p, ok
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	cost := map[string]int{}
	height := map[string]int{} // of a done node: its deepest path below it
	tooDeep := func(ptr string) error {
		return schemaProblem(ptr, event.RuleDepth, fmt.Sprintf("subschemas nest deeper than %d (each $ref followed counts), the deepest a size schema may be", MaxSchemaDepth))
	}
	var visit func(n *schemaNode, depth int) (int, error)
	visit = func(n *schemaNode, depth int) (int, error) {
		if depth > MaxSchemaDepth {
			return 0, tooDeep(n.ptr)
		}
		switch state[n.ptr] {
		case done:
			if depth+height[n.ptr] > MaxSchemaDepth {
				return 0, tooDeep(n.ptr)
			}
			return cost[n.ptr], nil
		case onPath:
			return 0, errCycle
		}
		state[n.ptr] = onPath
		total, h := 1, 0
		next := make([]*schemaNode, 0, len(n.children)+len(n.refs))
		next = append(next, n.children...)
		for _, r := range n.refs {
			p, ok := resolve(r.target)
			if !ok {
				return 0, schemaProblem(r.at, event.RuleSchema, fmt.Sprintf("reference %q is not a place in this document (only \"#...\" and embedded $id references are allowed in a size schema)", r.target))
			}
			if state[p] == onPath {
				return 0, schemaProblem(r.at, event.RuleSchema, fmt.Sprintf("reference %q makes a cycle (%s is inside its own evaluation), so no size could ever be judged", r.target, displayPtr(p)))
			}
			next = append(next, nodes[p])
		}
		for _, c := range next {
			k, err := visit(c, depth+1)
			if err != nil {
				return 0, err
			}
			total += k
			h = max(h, 1+height[c.ptr])
			if total > MaxSchemaCost {
				return 0, schemaProblem(n.ptr, event.RuleSchema, fmt.Sprintf("costs more than %d subschemas once each $ref is replaced by its target, the most a size schema may cost to evaluate", MaxSchemaCost))
			}
		}
		state[n.ptr] = done
		cost[n.ptr] = total
		height[n.ptr] = h
		return total, nil
	}
	_, err := visit(root, 0)
	if err == errCycle {
		return schemaProblem("", event.RuleSchema, "the $ref graph has a cycle, so no size could ever be judged")
	}
	return err
}

var errCycle = fmt.Errorf("cycle")

func displayPtr(p string) string {
	if p == "" {
		return "the document"
	}
	return p
}

// walkSchema records v, the subschema at ptr, and every subschema in it.
func walkSchema(v any, ptr string, nodes map[string]*schemaNode, anchors, ids map[string]string) *schemaNode {
	n := &schemaNode{ptr: ptr}
	nodes[ptr] = n
	obj, ok := v.(map[string]any)
	if !ok {
		return n
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv := obj[k]
		kp := ptr + "/" + escapeToken(k)
		switch k {
		case "$ref", "$dynamicRef", "$recursiveRef":
			if s, ok := kv.(string); ok {
				n.refs = append(n.refs, schemaRef{at: kp, target: s})
			}
			continue
		case "$anchor", "$dynamicAnchor":
			if s, ok := kv.(string); ok {
				anchors[s] = ptr
			}
			continue
		case "$id", "id":
			if s, ok := kv.(string); ok && ptr != "" {
				ids[strings.TrimSuffix(s, "#")] = ptr
			}
			continue
		}
		switch child := kv.(type) {
		case map[string]any:
			if oneSchemaKeywords[k] {
				n.children = append(n.children, walkSchema(child, kp, nodes, anchors, ids))
			} else if mapSchemaKeywords[k] {
				names := make([]string, 0, len(child))
				for name := range child {
					names = append(names, name)
				}
				sort.Strings(names)
				for _, name := range names {
					if _, isArr := child[name].([]any); isArr {
						continue // dependencies: a list of names
					}
					n.children = append(n.children, walkSchema(child[name], kp+"/"+escapeToken(name), nodes, anchors, ids))
				}
			}
		case []any:
			if arraySchemaKeywords[k] {
				for i, c := range child {
					n.children = append(n.children, walkSchema(c, kp+"/"+strconv.Itoa(i), nodes, anchors, ids))
				}
			}
		}
	}
	return n
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
