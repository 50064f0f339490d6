package correlatehttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/httpbody"
	"github.com/tallyhq/tally/internal/problem"
)

// CloudEventsJSON is the media type of a CloudEvent in structured mode
// (CloudEvents HTTP protocol binding, section 3.2): the body is the event
// in the JSON format, its payload in "data".
const CloudEventsJSON = "application/cloudevents+json"

// TraceparentHeader is the W3C Trace Context request header whose trace-id
// and parent-id fill a create's traceId and parentId when its payload has
// neither.
const TraceparentHeader = "Traceparent"

// ceHeaderPrefix starts the header of every CloudEvents attribute in binary
// mode (ce-id, ce-source, …), as net/http canonicalizes it.
const ceHeaderPrefix = "Ce-"

// cloudEvent is the identity of a create that arrived as a CloudEvent.
type cloudEvent struct {
	id string
	// dataPrefix is the pointer of the payload in the request: "" in
	// binary mode, "/data" in structured mode.
	dataPrefix string
	// name says where an attribute came from, for messages: "the ce-id
	// header" in binary mode, "the CloudEvent's id" in structured mode.
	name func(attr string) string
	// bad holds the attributes given but refused before their value was
	// read (a ce-* header that does not decode), so none is also reported
	// missing.
	bad map[string]bool
}

// ceStringAttrs are the CloudEvents context attributes of type String (or
// URI-reference, Timestamp) that tally reads; any other attribute is an
// extension.
var ceStringAttrs = []string{"specversion", "id", "source", "type", "time", "datacontenttype", "dataschema", "subject"}

// decodeCreate decodes the payload of a create in whichever form it came
// (docs/decisions.md, CloudEvents HTTP binding):
//
//   - a plain payload (the body is the JSON payload);
//   - a CloudEvent in binary mode: any ce-* header; the body is the payload,
//     the headers are its attributes;
//   - a CloudEvent in structured mode: Content-Type
//     application/cloudevents+json; the payload is the event's "data".
//
// For a CloudEvent it applies the attributes (see [Handler.Routes] and the
// README) and returns the event's identity; it returns every problem found.
// A request that cannot be a create at all (a CloudEvents batch) is an
// error.
func decodeCreate(r *http.Request, body []byte) (correlate.Payload, *cloudEvent, []event.Problem, error) {
	mt := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ = mime.ParseMediaType(ct)
	}
	binary := false
	for k := range r.Header {
		if strings.HasPrefix(k, ceHeaderPrefix) {
			binary = true
			break
		}
	}
	switch {
	case mt == "application/cloudevents-batch+json":
		return correlate.Payload{}, nil, nil, &problem.Error{Details: problem.New(problem.CodeUnsupportedMediaType,
			"createEvent takes one CloudEvent: send each event of a batch in its own request.",
			event.Problem{Rule: event.RuleContentMediaType, Message: "a CloudEvents batch is not accepted; send application/cloudevents+json or binary mode"})}
	case mt == CloudEventsJSON:
		p, ce, ps := decodeStructured(r, body, binary)
		return p, ce, ps, nil
	case binary:
		p, ce, ps := decodeBinary(r, body)
		return p, ce, ps, nil
	}
	p, err := correlate.DecodePayload(body)
	return p, nil, problemsOf(err), errorUnlessInvalid(err)
}

// problemsOf returns the problems of a validation error, prefixed with
// pointer prefix; nil for nil.
func problemsOf(err error, prefix ...string) []event.Problem {
	var ve *event.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	ps := slices.Clone(ve.Problems)
	for i := range ps {
		for _, p := range prefix {
			ps[i].Member = p + ps[i].Member
		}
	}
	return ps
}

// errorUnlessInvalid is err unless it is a validation error (whose
// problems problemsOf returns).
func errorUnlessInvalid(err error) error {
	var ve *event.ValidationError
	if errors.As(err, &ve) {
		return nil
	}
	return err
}

// decodeBinary reads a binary-mode CloudEvent: attributes from the ce-*
// headers (each given once, decoded by headerValue), the body as the
// payload.
func decodeBinary(r *http.Request, body []byte) (correlate.Payload, *cloudEvent, []event.Problem) {
	p, err := correlate.DecodePayload(body)
	ps := problemsOf(err)
	attrs := map[string]jsontext.Value{}
	ce := &cloudEvent{name: func(a string) string { return "the ce-" + a + " header" }, bad: map[string]bool{}}
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		name, ok := strings.CutPrefix(k, ceHeaderPrefix)
		if !ok {
			continue
		}
		name = strings.ToLower(name)
		if prob := attributeName(name); prob != nil {
			ps = append(ps, *prob)
			ce.bad[name] = true
			continue
		}
		values := r.Header[k]
		if len(values) > 1 {
			ps = append(ps, event.Problem{Member: "/" + name, Rule: event.RuleFormat,
				Message: "the ce-" + name + " header must be given once"})
			ce.bad[name] = true
			continue
		}
		hv, prob := headerValue(values[0])
		if prob != nil {
			prob.Member = "/" + name
			prob.Message = "the ce-" + name + " header " + prob.Message
			ps = append(ps, *prob)
			ce.bad[name] = true
			continue
		}
		v, err := jsontext.AppendQuote(nil, hv)
		if err != nil {
			ps = append(ps, event.Problem{Member: "/" + name, Rule: event.RuleUTF8,
				Message: "the ce-" + name + " header must be valid UTF-8"})
			ce.bad[name] = true
			continue
		}
		attrs[name] = v
	}
	ps = applyCloudEvent(&p, ce, attrs, ps, err == nil)
	return p, ce, ps
}

// attributeName checks the attribute name a ce-* header carries:
// CloudEvents 1.0, Attribute Naming Convention: "CloudEvents attribute names
// MUST consist of lower-case letters ('a' to 'z') or digits ('0' to '9')
// from the ASCII character set" (header names are case-insensitive, so the
// header's name is read lower-cased). "data" is the event's data, which
// binary mode carries as the body, never as a header.
func attributeName(name string) *event.Problem {
	ok := name != "" && name != "data"
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
	}
	if ok {
		return nil
	}
	return &event.Problem{Member: "/" + name, Rule: event.RuleFormat, Message: fmt.Sprintf(
		"the ce-%s header names no CloudEvents attribute: a name is lower-case letters a-z and digits 0-9 (CloudEvents 1.0, Attribute Naming Convention), and binary mode sends data as the body", name)}
}

// headerValue decodes a ce-* header value as the CloudEvents HTTP binding
// says (section 3.1.3.2): "any HTTP header value MUST first be unescaped
// with respect to double-quoted strings, as described in RFC7230, section
// 3.2.6. A single round of percent-decoding MUST then be performed", where
// "decoding MUST accept lower-case values", "values that have been
// unnecessarily percent-encoded MUST be accepted, but encoded byte sequences
// which are invalid in UTF-8 MUST be rejected".
//
// A value that is a whole quoted-string (DQUOTE … DQUOTE, backslash
// escaping the next character) is unquoted; any other is taken as sent,
// raw non-ASCII UTF-8 included. A '%' not followed by two hex digits is not
// an escape and stays a '%' (the way WHATWG URL percent-decoding leaves
// it): sdk-go v2.16.2 sends its header values raw, so a subject such as
// "cpu at 100%" is read as meant in both modes rather than refused. Only a
// result that is not valid UTF-8 (overlong forms and surrogates included)
// is a problem, whose message completes "the ce-x header …"; the caller
// sets its member.
func headerValue(v string) (string, *event.Problem) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		if u, ok := unquote(v); ok {
			v = u
		}
	}
	if !strings.Contains(v, "%") {
		if !utf8.ValidString(v) {
			return "", &event.Problem{Rule: event.RuleUTF8, Message: "must be valid UTF-8 (CloudEvents HTTP binding, 3.1.3.2)"}
		}
		return v, nil
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b = append(b, v[i])
			continue
		}
		hi, lo := unhex(v, i+1), unhex(v, i+2)
		if hi < 0 || lo < 0 {
			b = append(b, '%') // not an escape: a literal '%'
			continue
		}
		b = append(b, byte(hi<<4|lo))
		i += 2
	}
	if !utf8.Valid(b) {
		return "", &event.Problem{Rule: event.RuleUTF8, Message: "must percent-decode to valid UTF-8 (CloudEvents HTTP binding, 3.1.3.2: invalid encoded byte sequences MUST be rejected)"}
	}
	return string(b), nil
}

// unquote reads v as an RFC 9110 quoted-string (RFC 7230, section 3.2.6):
// DQUOTE, then characters or a backslash and the character it escapes,
// then DQUOTE; false if v is not one (an unescaped DQUOTE inside, a
// trailing backslash).
func unquote(v string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		switch c := v[i]; c {
		case '"':
			return "", false
		case '\\':
			if i+1 >= len(v)-1 {
				return "", false
			}
			i++
			b.WriteByte(v[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// unhex is the value of the hex digit at index i of v (either case), or -1.
func unhex(v string, i int) int {
	if i >= len(v) {
		return -1
	}
	switch c := v[i]; {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// decodeStructured reads a structured-mode CloudEvent: one JSON object
// whose members are the attributes and "data" the payload (a JSON object).
func decodeStructured(r *http.Request, body []byte, ceHeaders bool) (correlate.Payload, *cloudEvent, []event.Problem) {
	ce := &cloudEvent{dataPrefix: "/data", name: func(a string) string { return "the CloudEvent's " + a }}
	var ps []event.Problem
	if ceHeaders {
		ps = append(ps, event.Problem{Rule: event.RuleConst,
			Message: "a structured-mode CloudEvent carries its attributes in the body; send no ce-* headers with it"})
	}
	attrs := map[string]jsontext.Value{}
	var data jsontext.Value
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	bad := func(err error) (correlate.Payload, *cloudEvent, []event.Problem) {
		member := ""
		var se *jsontext.SyntacticError
		if errors.As(err, &se) {
			member = string(se.JSONPointer)
		}
		rule := event.RuleSyntax
		if errors.Is(err, jsontext.ErrDuplicateName) {
			rule = event.RuleDuplicateMember
		}
		return correlate.Payload{}, ce, append(ps, event.Problem{Member: member, Rule: rule, Message: "invalid JSON: " + err.Error()})
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return bad(err)
	}
	if tok.Kind() != '{' {
		return correlate.Payload{}, ce, append(ps, event.Problem{Rule: event.RuleType, Message: "a structured-mode CloudEvent must be a JSON object"})
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return bad(err)
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return bad(err)
		}
		switch {
		case name == "data":
			data = v.Clone()
		case name == "data_base64":
			ps = append(ps, event.Problem{Member: "/data_base64", Rule: event.RuleContentMediaType,
				Message: "the payload must be JSON in data, not data_base64"})
		case v.Kind() == 'n':
			// A null attribute counts as absent (CloudEvents JSON format, 2.4).
		default:
			attrs[name] = v.Clone()
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return bad(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the CloudEvent")
		}
		return bad(err)
	}
	var p correlate.Payload
	ok := false
	switch {
	case data == nil || data.Kind() == 'n':
		ps = append(ps, event.Problem{Member: "/data", Rule: event.RuleRequired, Message: "is required: the event's payload"})
	case data.Kind() != '{':
		ps = append(ps, event.Problem{Member: "/data", Rule: event.RuleType, Message: "must be a JSON object: the event's payload"})
	default:
		var err error
		p, err = correlate.DecodePayload(data)
		ps = append(ps, problemsOf(err, "/data")...)
		ok = err == nil
	}
	ps = applyCloudEvent(&p, ce, attrs, ps, ok)
	return p, ce, ps
}

// lowerHex matches what W3C Trace Context allows in its fields.
var lowerHex = regexp.MustCompile(`^[0-9a-f]+$`)

// applyCloudEvent fills p from the attributes of a CloudEvent (values as
// JSON), recording the event's id in ce. When decoded is false p is not
// filled (its problems are already listed) but the attributes are still
// checked.
//
// The rules (docs/decisions.md, CloudEvents HTTP binding):
//   - specversion, id, source and type are required; specversion is "1.0";
//   - source, type and specversion fill the payload's members; a payload
//     member that disagrees is a problem naming it;
//   - time (RFC 3339) fills lastSeenAt, the latest time the condition was
//     seen; a payload lastSeenAt at another instant is a problem;
//   - datacontenttype, when given, is JSON ([httpbody.IsJSON]: */json or
//     */*+json, as the CloudEvents JSON event format counts it);
//   - subject, dataschema and every extension are kept with the event as
//     members of Payload.Extra under their attribute names (stored, never
//     returned at the top level); a payload member of that name with another
//     value is a problem.
func applyCloudEvent(p *correlate.Payload, ce *cloudEvent, attrs map[string]jsontext.Value, ps []event.Problem, decoded bool) []event.Problem {
	str, ps := ceStrings(ce, attrs, ps)
	ce.id = str["id"]
	at, ps := ceTime(ce, str, ps)
	if v, ok := str["datacontenttype"]; ok && !httpbody.IsJSON(v) {
		ps = append(ps, event.Problem{Member: "/datacontenttype", Rule: event.RuleContentMediaType,
			Message: fmt.Sprintf("%s must be a JSON media type, */json or */*+json (is %q): the payload is JSON", ce.name("datacontenttype"), v)})
	}
	if !decoded {
		return ps
	}
	ps = fillAttributes(p, ce, str, at, ps)
	ps = fillTrace(p, ce, attrs, ps)
	return fillExtensions(p, ce, attrs, ps)
}

// fillTrace applies the CloudEvents Distributed Tracing extension: its
// traceparent attribute (the ce-traceparent header in binary mode, a
// traceparent member in structured mode; W3C Trace Context) fills the
// payload's traceId and parentId when the payload has neither, before the
// request's own traceparent header would (docs/decisions.md, CloudEvents
// HTTP binding): the extension is the trace the event was made in, the
// header only the hop that delivered it. One that is not a string or not
// W3C Trace Context is a problem naming it; it is kept with the event as
// every extension is (tracestate too).
func fillTrace(p *correlate.Payload, ce *cloudEvent, attrs map[string]jsontext.Value, ps []event.Problem) []event.Problem {
	v, ok := attrs["traceparent"]
	if !ok || ce.bad["traceparent"] {
		return ps
	}
	var s string
	if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
		return append(ps, event.Problem{Member: "/traceparent", Rule: event.RuleType, Message: ce.name("traceparent") + " must be a string"})
	}
	trace, parent, err := traceparent(s)
	if err != nil {
		return append(ps, event.Problem{Member: "/traceparent", Rule: event.RuleFormat,
			Message: ce.name("traceparent") + " is not W3C Trace Context: " + err.Error()})
	}
	if p.TraceID == "" && p.ParentID == "" {
		p.TraceID, p.ParentID = trace, parent
	}
	return ps
}

// ceStrings returns the string attributes of a CloudEvent (ceStringAttrs)
// unquoted, with a problem for one that is not a JSON string and for a
// required one (specversion, id, source, type) that is missing or empty;
// specversion must be "1.0". An attribute in ce.bad already has its problem.
func ceStrings(ce *cloudEvent, attrs map[string]jsontext.Value, ps []event.Problem) (map[string]string, []event.Problem) {
	str := map[string]string{}
	for _, a := range ceStringAttrs {
		v, ok := attrs[a]
		if !ok {
			continue
		}
		var s string
		if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
			ps = append(ps, event.Problem{Member: "/" + a, Rule: event.RuleType, Message: ce.name(a) + " must be a string"})
			continue
		}
		str[a] = s
	}
	for _, a := range []string{"specversion", "id", "source", "type"} {
		// One given as another kind, or refused, has its problem already.
		v, given := attrs[a]
		if str[a] == "" && !ce.bad[a] && (!given || v.Kind() == '"') {
			ps = append(ps, event.Problem{Member: "/" + a, Rule: event.RuleRequired,
				Message: ce.name(a) + " is required: a CloudEvent has specversion, id, source and type"})
		}
	}
	if v := str["specversion"]; v != "" && v != "1.0" {
		ps = append(ps, event.Problem{Member: "/specversion", Rule: event.RuleConst,
			Message: fmt.Sprintf("%s must be 1.0 (is %q)", ce.name("specversion"), v)})
	}
	return str, ps
}

// ceTime parses the time attribute (RFC 3339, event.ParseTime), nil when
// it is not given or malformed (a problem).
func ceTime(ce *cloudEvent, str map[string]string, ps []event.Problem) (*time.Time, []event.Problem) {
	v, ok := str["time"]
	if !ok {
		return nil, ps
	}
	t, err := event.ParseTime(v)
	if err != nil {
		return nil, append(ps, event.Problem{Member: "/time", Rule: event.RuleFormat,
			Message: ce.name("time") + " " + event.TimeMessage(err)})
	}
	t = event.Normalize(t)
	return &t, ps
}

// fillAttributes fills p's source, type, specversion (when "1.0") and
// lastSeenAt (from time, at) from the attributes; a payload member already
// set to another value is a problem naming it.
func fillAttributes(p *correlate.Payload, ce *cloudEvent, str map[string]string, at *time.Time, ps []event.Problem) []event.Problem {
	fill := func(a string, field *string) {
		v, ok := str[a]
		switch {
		case !ok || v == "":
		case *field == "":
			*field = v
		case *field != v:
			ps = append(ps, event.Problem{Member: ce.dataPrefix + "/" + a, Rule: event.RuleConst,
				Message: fmt.Sprintf("must equal %s (%q) when both are given", ce.name(a), v)})
		}
	}
	fill("source", &p.Source)
	fill("type", &p.Type)
	if str["specversion"] == "1.0" {
		fill("specversion", &p.Specversion)
	}
	switch {
	case at == nil:
	case p.LastSeenAt == nil:
		p.LastSeenAt = at
	case !p.LastSeenAt.Equal(*at):
		ps = append(ps, event.Problem{Member: ce.dataPrefix + "/lastSeenAt", Rule: event.RuleConst,
			Message: fmt.Sprintf("must equal %s (%s) when both are given", ce.name("time"), at.Format(time.RFC3339Nano))})
	}
	return ps
}

// fillExtensions keeps subject, dataschema and every extension attribute
// in p.Extra under its name, in name order; a payload member of that name
// with another value is a problem naming it.
func fillExtensions(p *correlate.Payload, ce *cloudEvent, attrs map[string]jsontext.Value, ps []event.Problem) []event.Problem {
	names := make([]string, 0, len(attrs))
	for a := range attrs {
		if !slices.Contains(ceStringAttrs[:6], a) {
			names = append(names, a)
		}
	}
	slices.Sort(names)
	for _, a := range names {
		v := attrs[a]
		switch old, ok := p.Extra[a]; {
		case !ok:
			if p.Extra == nil {
				p.Extra = map[string]jsontext.Value{}
			}
			p.Extra[a] = v
		case !bytes.Equal(old, v):
			ps = append(ps, event.Problem{Member: ce.dataPrefix + "/" + a, Rule: event.RuleConst,
				Message: fmt.Sprintf("must equal %s (%s) when both are given", ce.name(a), v)})
		}
	}
	return ps
}

// traceparent parses a W3C Trace Context traceparent header (Level 1,
// section 3.2): version "-" trace-id "-" parent-id "-" trace-flags, lower-case
// hex; version ff is invalid; version 00 is exactly 55 characters, a later
// version may append fields after a "-"; trace-id and parent-id are not all
// zeros.
func traceparent(v string) (traceID, parentID string, err error) {
	switch {
	case len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-':
		return "", "", errors.New("must be version-traceid-parentid-traceflags (2, 32, 16 and 2 lower-case hex digits)")
	case !lowerHex.MatchString(v[:2]) || v[:2] == "ff":
		return "", "", errors.New("its version must be two lower-case hex digits other than ff")
	case v[:2] == "00" && len(v) != 55:
		return "", "", errors.New("version 00 is exactly 55 characters")
	case len(v) > 55 && v[55] != '-':
		return "", "", errors.New("fields after trace-flags must follow a '-'")
	case !lowerHex.MatchString(v[3:35]) || strings.Trim(v[3:35], "0") == "":
		return "", "", errors.New("its trace-id must be 32 lower-case hex digits, not all zeros")
	case !lowerHex.MatchString(v[36:52]) || strings.Trim(v[36:52], "0") == "":
		return "", "", errors.New("its parent-id must be 16 lower-case hex digits, not all zeros")
	case !lowerHex.MatchString(v[53:55]):
		return "", "", errors.New("its trace-flags must be 2 lower-case hex digits")
	}
	return v[3:35], v[36:52], nil
}

// applyTraceparent fills p's traceId and parentId from the request's
// traceparent header when p has neither (docs/decisions.md, CloudEvents HTTP
// binding). A malformed header is a problem naming it, whether or not it
// would be used: tally records the identifiers, so it refuses rather than
// ignores (W3C's "ignore and restart the trace" is for participants in the
// trace; a server never mints trace context, event-correlation.md).
func applyTraceparent(r *http.Request, p *correlate.Payload, dataPrefix string, decoded bool) []event.Problem {
	values, ok := r.Header[TraceparentHeader]
	if !ok {
		return nil
	}
	if len(values) > 1 {
		return []event.Problem{{Member: dataPrefix + "/traceId", Rule: event.RuleFormat, Message: "the traceparent header must be given once"}}
	}
	trace, parent, err := traceparent(values[0])
	if err != nil {
		return []event.Problem{{Member: dataPrefix + "/traceId", Rule: event.RuleFormat, Message: "the traceparent header is not W3C Trace Context: " + err.Error()}}
	}
	if decoded && p.TraceID == "" && p.ParentID == "" {
		p.TraceID, p.ParentID = trace, parent
	}
	return nil
}
