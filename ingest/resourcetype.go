package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// WrapperMember is the member of the documented body of PUT
// /api/v1/resource-types/{platform}/{resource_type}, {"size_schema": {…}}:
// the body of the Reporting API's RegisterResourceType, which tally replaces.
const WrapperMember = "size_schema"

// unwrapSizeSchema returns the size schema a PUT body registers, as
// [Service.PutResourceType] describes, and the JSON Pointer of the schema
// in body: "/size_schema" for the wrapper, "" for a bare schema. A wrapper
// with any other top-level member is refused with an
// [*event.ValidationError] naming each (rule additionalProperties), so a
// misspelt or half-wrapped body is never stored as a schema that accepts
// everything. Bytes that are not strict JSON are returned as given, for
// compileSizeSchema to refuse.
func unwrapSizeSchema(body jsontext.Value) (schema jsontext.Value, at string, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if dec.PeekKind() != '{' {
		return body, "", nil
	}
	if _, err := dec.ReadToken(); err != nil {
		return body, "", nil
	}
	var (
		inner  jsontext.Value
		others []string
	)
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return body, "", nil
		}
		name := tok.String() // before the next read, which reuses the token's buffer
		v, err := dec.ReadValue()
		if err != nil {
			return body, "", nil
		}
		if name == WrapperMember {
			inner = bytes.Clone(v)
		} else {
			others = append(others, name)
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return body, "", nil
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return body, "", nil // trailing data: not strict JSON
	}
	if inner == nil {
		return body, "", nil
	}
	if len(others) > 0 {
		ps := make([]event.Problem, 0, min(len(others), maxSizeProblems))
		for _, o := range others[:min(len(others), maxSizeProblems)] {
			ps = append(ps, event.Problem{Member: event.SafePointer(event.Pointer(o)), Rule: event.RuleAdditionalProperties,
				Message: fmt.Sprintf("is not allowed: the body {%q: schema} holds no other member", WrapperMember)})
		}
		return nil, "", &event.ValidationError{Problems: ps}
	}
	return inner, event.Pointer(WrapperMember), nil
}
