package oslo

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Shape is the envelope a notification arrived in
// (testdata/openstack/README.md, "Three envelope shapes").
type Shape string

// The envelope shapes.
const (
	// ShapeVersioned is a nova versioned documentation sample: event_type,
	// priority, publisher_id and payload only, with no message_id and no
	// timestamp.
	ShapeVersioned Shape = "V"
	// ShapeWire is the flat wire envelope of the messaging driver:
	// message_id, timestamp, and the context in _context_* keys.
	ShapeWire Shape = "W"
	// ShapeListener is what a notification endpoint receives: the context
	// under ctxt, and metadata = {message_id, timestamp}.
	ShapeListener Shape = "L"
)

// Shapes lists every [Shape], in the order the corpus README names them.
func Shapes() []Shape { return []Shape{ShapeVersioned, ShapeWire, ShapeListener} }

// Notification is one oslo notification with its envelope taken apart. The
// payload and the context keep every member as exact JSON.
type Notification struct {
	// Shape is the envelope the notification arrived in.
	Shape Shape
	// Wrapped reports that the notification came inside a messagingv2
	// {"oslo.version", "oslo.message"} wrapper (its Shape is then the shape
	// of the inner object, ShapeWire in practice).
	Wrapped bool
	// EventType is the oslo event_type, never "".
	EventType string
	// PublisherID is publisher_id; "" when absent or null.
	PublisherID string
	// Priority is priority as sent ("INFO", sometimes "info"); "" in shape L.
	Priority string
	// MessageID is message_id (W) or metadata.message_id (L); "" when
	// absent, null or empty, as in every shape V line.
	MessageID string
	// Timestamp is the envelope's timestamp (W) or metadata.timestamp (L)
	// as written, not yet parsed; "" when absent or null.
	Timestamp string
	// Payload is the payload object.
	Payload Object
	// Context is the request context: ctxt in shape L, or the _context_*
	// members of shape W with the prefix removed. Nil in shape V.
	Context Object
}

// Object is a JSON object whose members keep their exact JSON values.
type Object map[string]jsontext.Value

// ParseError is the refusal of a line that is not an oslo notification at
// all: not a JSON object, or one without event_type or payload.
type ParseError struct{ Reason string }

// Error says why the line is not a notification.
func (e *ParseError) Error() string { return "not an oslo notification: " + e.Reason }

// Parse decodes one notification and recognises its envelope. It is
// strict about JSON (a member given twice or invalid UTF-8 is refused) and
// lenient about members it does not read. The error is a [*ParseError].
func Parse(raw []byte) (*Notification, error) {
	top, err := decodeObject(raw)
	if err != nil {
		return nil, &ParseError{Reason: err.Error()}
	}
	n := &Notification{}
	if msg, ok := top["oslo.message"]; ok {
		s, ok := stringValue(msg)
		if !ok {
			return nil, &ParseError{Reason: "oslo.message must be a string holding the notification"}
		}
		if top, err = decodeObject([]byte(s)); err != nil {
			return nil, &ParseError{Reason: "oslo.message: " + err.Error()}
		}
		n.Wrapped = true
	}
	n.EventType = top.Str("event_type")
	if n.EventType == "" {
		return nil, &ParseError{Reason: "event_type must be a non-empty string"}
	}
	if n.Payload = top.Obj("payload"); n.Payload == nil {
		return nil, &ParseError{Reason: "payload must be a JSON object"}
	}
	n.PublisherID = top.Str("publisher_id")
	n.Priority = top.Str("priority")

	_, hasCtxt := top["ctxt"]
	meta := top.Obj("metadata")
	switch {
	case meta != nil || hasCtxt:
		n.Shape = ShapeListener
		n.Context = top.Obj("ctxt")
		n.MessageID = first(meta.Str("message_id"), top.Str("message_id"))
		n.Timestamp = first(timeText(meta, "timestamp"), timeText(top, "timestamp"))
	case wireKeys(top):
		n.Shape = ShapeWire
		n.MessageID = top.Str("message_id")
		n.Timestamp = timeText(top, "timestamp")
		n.Context = Object{}
		for k, v := range top {
			if rest, ok := strings.CutPrefix(k, "_context_"); ok && rest != "" {
				n.Context[rest] = v
			}
		}
	default:
		n.Shape = ShapeVersioned
	}
	return n, nil
}

// timeText returns member k as a string to parse: the string itself, or
// the JSON text of a value of another kind (a timestamp that is not a
// string is damaged, not absent); "" when absent or null.
func timeText(o Object, k string) string {
	v, ok := o[k]
	if !ok || v.Kind() == 'n' {
		return ""
	}
	if s, ok := stringValue(v); ok {
		return s
	}
	return string(v)
}

// wireKeys reports whether top has a member only the wire envelope carries.
func wireKeys(top Object) bool {
	if _, ok := top["message_id"]; ok {
		return true
	}
	if _, ok := top["timestamp"]; ok {
		return true
	}
	for k := range top {
		if strings.HasPrefix(k, "_context_") {
			return true
		}
	}
	return false
}

func decodeObject(b []byte) (Object, error) {
	v := jsontext.Value(b)
	if k := firstNonSpace(b); k != '{' {
		return nil, errors.New("must be a JSON object")
	}
	var o Object
	if err := json.Unmarshal(v, &o); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if o == nil {
		return nil, errors.New("must be a JSON object")
	}
	return o, nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func stringValue(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// Str returns member k when it is a string, else "" (absent, null, or
// another kind). A nil Object has no members.
func (o Object) Str(k string) string {
	s, _ := stringValue(o[k])
	return s
}

// Obj returns member k when it is an object, else nil.
func (o Object) Obj(k string) Object {
	v, ok := o[k]
	if !ok || v.Kind() != '{' {
		return nil
	}
	var m Object
	if err := json.Unmarshal(v, &m); err != nil {
		return nil
	}
	return m
}

// Len returns the number of elements of member k when it is an array.
func (o Object) Len(k string) (int, bool) {
	v, ok := o[k]
	if !ok || v.Kind() != '[' {
		return 0, false
	}
	var a []jsontext.Value
	if err := json.Unmarshal(v, &a); err != nil {
		return 0, false
	}
	return len(a), true
}

// maxNumberLen and maxExponent bound the numbers [Object.Num] reads: a
// size in a notification is a few digits, and a literal such as 1e-9999999
// would make exact arithmetic on it take minutes.
const (
	maxNumberLen = 64
	maxExponent  = 64
)

// Num returns member k when it is a JSON number, as an exact rational and
// as its literal text. A literal longer than 64 bytes or with an exponent
// beyond ±64 is not read (false).
func (o Object) Num(k string) (*big.Rat, string, bool) {
	v, ok := o[k]
	if !ok || v.Kind() != '0' || len(v) > maxNumberLen {
		return nil, "", false
	}
	if i := strings.IndexAny(string(v), "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(string(v[i+1:]), "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return nil, "", false
		}
	}
	r, ok := new(big.Rat).SetString(string(v))
	if !ok {
		return nil, "", false
	}
	return r, string(v), true
}

// present reports whether member k is there and is neither null nor "".
func (o Object) present(k string) bool {
	v, ok := o[k]
	if !ok {
		return false
	}
	switch v.Kind() {
	case 'n':
		return false
	case '"':
		s, _ := stringValue(v)
		return s != ""
	}
	return true
}
