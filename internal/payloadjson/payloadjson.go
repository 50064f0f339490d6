// Package payloadjson writes an event's payload envelope as JSON: the
// writer behind event.PayloadEnvelope.MarshalJSON, which checks the raw
// members first, and behind the PostgreSQL store's COPY of events that
// the ingest pipeline decoded and checked itself, which need no second
// check.
package payloadjson

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// State is the payload's state member (event.State): absent (IsZero),
// null (Missing but not IsZero), or the string String.
type State interface {
	IsZero() bool
	Missing() bool
	String() string
}

// Append appends the envelope as one compact JSON object to dst: "state"
// (when present), "size" and "provider" (when non-nil), then the members
// of the object unknown (when non-nil), the raw ones byte for byte. It
// takes size, provider and unknown as given: each one valid JSON value,
// unknown an object naming none of state, size and provider (what
// event.Decode produces; event.PayloadEnvelope.MarshalJSON checks this
// before calling it). It fails, appending nothing, only when the state is
// not valid UTF-8.
func Append[S State](dst []byte, state S, size, provider, unknown []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, '{')
	sep := func() {
		if len(dst) > start+1 {
			dst = append(dst, ',')
		}
	}
	if !state.IsZero() {
		dst = append(dst, `"state":`...)
		if state.Missing() {
			dst = append(dst, "null"...)
		} else {
			var err error
			if dst, err = jsontext.AppendQuote(dst, state.String()); err != nil {
				return dst[:start], fmt.Errorf("event: payload state: %w", err)
			}
		}
	}
	if size != nil {
		sep()
		dst = append(append(dst, `"size":`...), size...)
	}
	if provider != nil {
		sep()
		dst = append(append(dst, `"provider":`...), provider...)
	}
	if unknown != nil {
		obj := bytes.TrimSpace(unknown)
		if inner := bytes.TrimSpace(obj[1 : len(obj)-1]); len(inner) > 0 {
			sep()
			dst = append(dst, inner...)
		}
	}
	return append(dst, '}'), nil
}
