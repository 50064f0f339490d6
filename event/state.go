package event

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// State is payload.state: a string that may also be absent or null. The zero
// value is absent. Absent, null and "" survive a round trip as they came;
// absent and null both count as missing for the rules ([State.Missing]).
type State struct {
	value string
	kind  stateKind
}

type stateKind uint8

const (
	stateAbsent stateKind = iota
	stateNull
	stateString
)

// StateOf returns a present state holding s (which may be "").
func StateOf(s string) State { return State{value: s, kind: stateString} }

// NullState returns a state that is present and JSON null.
func NullState() State { return State{kind: stateNull} }

// String returns the state's text; "" when absent or null.
func (s State) String() string { return s.value }

// Missing reports whether the state is absent or null, which the rules read
// alike: "state required" is broken by either.
func (s State) Missing() bool { return s.kind != stateString }

// IsNull reports whether the member was present and null.
func (s State) IsNull() bool { return s.kind == stateNull }

// IsZero reports whether the member is absent; the encoder omits it then.
func (s State) IsZero() bool { return s.kind == stateAbsent }

// MarshalJSONTo writes the state as a JSON string, or null.
func (s State) MarshalJSONTo(enc *jsontext.Encoder) error {
	if s.kind != stateString {
		return enc.WriteToken(jsontext.Null)
	}
	return enc.WriteToken(jsontext.String(s.value))
}

// UnmarshalJSONFrom reads a JSON string or null. Any other kind is refused.
func (s *State) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case 'n':
		*s = NullState()
	case '"':
		*s = StateOf(tok.String())
	default:
		return errStateKind
	}
	return nil
}

// MarshalJSON is [State.MarshalJSONTo] for encoding/json.
func (s State) MarshalJSON() ([]byte, error) {
	if s.kind != stateString {
		return []byte("null"), nil
	}
	return jsontext.AppendQuote(nil, s.value)
}

// UnmarshalJSON is [State.UnmarshalJSONFrom] for encoding/json.
func (s *State) UnmarshalJSON(b []byte) error {
	return s.UnmarshalJSONFrom(jsontext.NewDecoder(bytes.NewReader(b)))
}
