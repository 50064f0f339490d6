package event

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/internal/payloadjson"
)

// The encoder's faithfulness rules are in the package documentation
// (doc.go, Faithfulness).

// headEvent is an event without its payload: the members the encoder
// canonicalises.
type headEvent struct {
	EventID      string     `json:"event_id"`
	Timestamp    *time.Time `json:"timestamp"` // nil (null) for the zero time: no timestamp
	EventType    string     `json:"event_type"`
	Platform     string     `json:"platform"`
	Cloud        string     `json:"cloud"`
	ResourceType string     `json:"resource_type"`
	ResourceID   string     `json:"resource_id"`
	ProjectID    string     `json:"project_id"`
	Source       Source     `json:"source,omitzero"`
}

var errNotRaw = errors.New("is not one valid JSON value (valid UTF-8, no member given twice)")

// appendEvent appends e as one JSON object, its payload with
// appendPayload.
func appendEvent(dst []byte, e *Event) ([]byte, error) {
	var ts *time.Time
	if !e.Timestamp.IsZero() {
		ts = &e.Timestamp
	}
	head, err := json.Marshal(headEvent{
		EventID: e.EventID, Timestamp: ts, EventType: e.EventType,
		Platform: e.Platform, Cloud: e.Cloud, ResourceType: e.ResourceType,
		ResourceID: e.ResourceID, ProjectID: e.ProjectID, Source: e.Source,
	}, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	dst = append(dst, head[:len(head)-1]...)
	dst = append(dst, `,"payload":`...)
	if dst, err = appendPayload(dst, &e.Payload); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

// appendPayload appends p as one JSON object: state (when present), size
// and provider (when non-nil) and the unknown members, the raw ones
// byte for byte. It fails, appending nothing, when a raw member is not one
// valid JSON value, or Unknown is not an object or names state, size or
// provider.
func appendPayload(dst []byte, p *PayloadEnvelope) ([]byte, error) {
	for _, f := range [...]struct {
		name string
		raw  jsontext.Value
	}{{"size", p.Size}, {"provider", p.Provider}, {"unknown members", p.Unknown}} {
		if f.raw != nil && !f.raw.IsValid() {
			return nil, fmt.Errorf("event: payload %s %w", f.name, errNotRaw)
		}
	}
	if p.Unknown != nil {
		if p.Unknown.Kind() != '{' {
			return nil, errors.New("event: payload unknown members must form an object")
		}
		for _, name := range [...]string{"state", "size", "provider"} {
			if unknownHas(p.Unknown, name) {
				return nil, fmt.Errorf("event: payload member %s is given more than once (also among the unknown members)", name)
			}
		}
	}
	return payloadjson.Append(dst, p.State, p.Size, p.Provider, p.Unknown)
}

// rawUnknown returns the members of the payload object raw that the
// envelope does not name, each name and value with its exact bytes, joined
// into one object; nil when there are none. raw has been decoded already,
// so it is valid JSON.
func rawUnknown(raw []byte) (jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("event: payload is not an object: %v", err)
	}
	out := []byte{'{'}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		mark := len(out)
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, name...)
		text, err := jsontext.AppendUnquote(nil, name)
		if err != nil {
			return nil, err
		}
		val, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		switch string(text) {
		case "state", "size", "provider":
			out = out[:mark]
			continue
		}
		out = append(append(out, ':'), val...)
	}
	if len(out) == 1 {
		return nil, nil
	}
	return append(out, '}'), nil
}

// payloadMember returns the raw value of the top-level member "payload" of
// the object b, which has been decoded already; nil when absent.
func payloadMember(b []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if tok.String() != "payload" {
			if err := dec.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return bytes.Clone(v), nil
	}
	return nil, io.ErrUnexpectedEOF // Decode read a payload: never reached
}
