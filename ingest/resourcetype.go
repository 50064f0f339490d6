package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// WrapperMember is the member of the documented body of PUT
// /api/v1/resource-types/{platform}/{resource_type}, {"size_schema": {…}}:
// the body of the Reporting API's RegisterResourceType, which tally replaces.
const WrapperMember = "size_schema"

// UnwrapSizeSchema returns the size schema a PUT body registers (issue 13,
// Tally's reporting client). The documented body is the wrapper
// {"size_schema": <schema>}; a bare JSON Schema document is still accepted.
// The two are told apart by the body's top-level members: a JSON object that
// has a member named "size_schema" (not a JSON Schema keyword, so a bare
// schema never needs one at its top level) is the wrapper, and its value is
// returned byte for byte; any other body is the bare schema, returned as
// given. A wrapper with any other top-level member is refused with a
// [*SchemaError] (matching [ErrInvalidSchema]) naming it, so a misspelt or
// half-wrapped body is never stored as a schema that accepts everything; so
// is a wrapped schema that does not compile ([CompileSizeSchema]), its
// message naming members from the body's root (/size_schema/maxLength).
// Bytes that are not strict JSON are returned as given, for
// [CompileSizeSchema] (which [Service.PutResourceType] runs) to refuse.
func UnwrapSizeSchema(platform, resourceType string, body []byte) (jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if dec.PeekKind() != '{' {
		return body, nil
	}
	if _, err := dec.ReadToken(); err != nil {
		return body, nil
	}
	var (
		inner  jsontext.Value
		others []string
	)
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return body, nil
		}
		name := tok.String() // before the next read, which reuses the token's buffer
		v, err := dec.ReadValue()
		if err != nil {
			return body, nil
		}
		if name == WrapperMember {
			inner = bytes.Clone(v)
		} else {
			others = append(others, name)
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return body, nil
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return body, nil // trailing data: not strict JSON
	}
	if inner == nil {
		return body, nil
	}
	if len(others) > 0 {
		return nil, &SchemaError{Platform: platform, ResourceType: resourceType, Message: fmt.Sprintf(
			"/%s: additionalProperties: the body {%q: schema} holds no other member, got %q", others[0], WrapperMember, others[0])}
	}
	// Compiled here, against the body, so that a refusal names the member
	// in what was sent (/size_schema/maxLength, not /maxLength); PutResourceType
	// compiles it again, as it does a bare schema.
	if _, err := compileSizeSchema(inner, "/"+WrapperMember); err != nil {
		return nil, &SchemaError{Platform: platform, ResourceType: resourceType, Message: err.Error()}
	}
	return inner, nil
}
