// Package problem writes RFC 9457 problem details (application/problem+json),
// the one error body every tally HTTP handler answers with.
//
// A body reads:
//
//	{"type":"urn:tally:error:validation","title":"Invalid event","status":400,
//	 "detail":"…","code":"invalid_event","errors":[{"member":"/severity","rule":"enum","message":"…",
//	 "loc":"body.severity","msg":"…"}]}
//
// code is the stable, machine-readable identifier of the problem; type is a
// URN, as RFC 9457 asks for a URI: the problem kind of B42Labs/tally's
// Reporting API that the code answers as ([Code.Kind]), so that Tally's
// clients, which match on it, keep working. errors lists each problem as a
// [FieldError]: tally's one problem shape ([event.Problem]: member, a JSON
// Pointer into the request body or "/" + the name of a query or path
// parameter; rule, an event.Rule* constant; message) and the same in
// Tally's shape (loc, msg); it is present only when there are member
// problems.
//
// Every code is a [Code] declared once in this package and listed by
// [Codes], each with its one status; [Fail] is the one mapper from a
// handler's error to its answer, shared by both HTTP adapters and the
// server, each adding only its own cases.
package problem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// ContentType is the media type of a problem body.
const ContentType = "application/problem+json"

// Details is a problem body.
type Details struct {
	Type   string          `json:"type"`
	Title  string          `json:"title"`
	Status int             `json:"status"`
	Detail string          `json:"detail,omitempty"`
	Code   Code            `json:"code"`
	Errors []event.Problem `json:"errors,omitempty"`
}

// MarshalJSON writes d with each entry of errors a [FieldError].
func (d Details) MarshalJSON() ([]byte, error) {
	type plain Details // without this method
	w := struct {
		plain
		Errors []FieldError `json:"errors,omitempty"`
	}{plain: plain(d)}
	for _, m := range d.Errors {
		w.Errors = append(w.Errors, FieldError{Problem: m, Loc: loc(d.Code, m.Member), Msg: m.Message})
	}
	return json.Marshal(w, json.Deterministic(true))
}

// FieldError is one member problem of a problem body: tally's
// [event.Problem] (member, rule, message) and the same place and text as
// B42Labs/tally's Reporting API writes a field error: loc, "query" for a
// parameter ([CodeInvalidParameter]; a path parameter too), else "body",
// then the member's JSON Pointer tokens each after a "." (query.limit,
// query.filter.status, body.severity, body.0.event_id), and msg, the
// message.
type FieldError struct {
	event.Problem `json:",inline"`
	Loc           string `json:"loc"`
	Msg           string `json:"msg"`
}

// New builds a problem of code, with its status, title and type
// ([Code.Status], [Code.Title], [Code.Kind]), the given detail and member
// problems.
func New(code Code, detail string, members ...event.Problem) Details {
	return Details{
		Type:   "urn:tally:error:" + code.Kind(),
		Title:  code.Title(),
		Status: code.Status(),
		Detail: detail,
		Code:   code,
		Errors: members,
	}
}

// loc is Tally's location of member (see [FieldError]).
func loc(code Code, member string) string {
	out := "body"
	if code == CodeInvalidParameter {
		out = "query"
	}
	if member == "" {
		return out
	}
	for _, tok := range strings.Split(strings.TrimPrefix(member, "/"), "/") {
		out += "." + strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	}
	return out
}

// Write sends p as the response, with its status and content type. A 401
// also gets the WWW-Authenticate challenge, [Challenge], as RFC 9110
// requires.
func Write(w http.ResponseWriter, p Details) {
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", Challenge)
	}
	write(w, p.Status, ContentType, p)
}

// WriteJSON sends v as a JSON answer (application/json, members in a
// deterministic order, a final newline) with status: the one JSON writer of
// tally's HTTP handlers. A v that cannot be encoded is answered 500
// ([Internal]) instead, which only a programming error causes.
//
// Faithfulness (docs/decisions.md, Faithfulness): every raw JSON value in v (a
// [jsontext.Value]: a correlated event's metadata, a resource's size, a size
// schema) and every [event.Event] (whose payload.size, payload.provider and
// unknown payload members [event.Event.MarshalJSON] gives as stored) is
// written byte for byte as held, white space and string escapes included,
// apart from white space around the whole value. The rest of the answer is
// compact JSON; the answer is valid JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	write(w, status, "application/json", v)
}

func write(w http.ResponseWriter, status int, contentType string, v any) {
	b, spans, err := marshal(v)
	if err != nil {
		status, contentType, spans = http.StatusInternalServerError, ContentType, nil
		b, _ = json.Marshal(Internal())
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The pieces go out as they are, never joined into one more copy of
	// the answer: a page of 8 MiB would otherwise be held twice more.
	_ = splice(b, spans, func(p []byte) error { _, err := w.Write(p); return err })
	_, _ = w.Write([]byte{'\n'})
}

// Marshal encodes v as [WriteJSON] writes it (without the final newline):
// compact JSON, members in a deterministic order, each [jsontext.Value] and
// each [event.Event] in v byte for byte as held. It fails when v cannot be
// encoded or one of those raw values is not one valid JSON value (valid
// UTF-8, no member given twice).
//
// The encoder itself always reformats a raw value's white space
// ([jsontext.Encoder.WriteValue]), so Marshal records where each such value
// lands in the output (its [jsontext.Encoder.OutputOffset] before and after)
// and then puts the held bytes in place of the reformatted ones: both spell
// the same JSON value, so the answer stays valid.
func Marshal(v any) ([]byte, error) {
	b, spans, err := marshal(v)
	if err != nil || len(spans) == 0 {
		return b, err
	}
	out := make([]byte, 0, len(b))
	_ = splice(b, spans, func(p []byte) error { out = append(out, p...); return nil })
	return out, nil
}

// span is one raw value of an answer: where the encoder put its
// reformatted copy in the output (after any delimiter), and the held bytes.
type span struct {
	start, end int
	raw        []byte
}

// marshal encodes v as [Marshal] describes, returning the encoder's output
// and the spans whose held bytes replace what the encoder wrote there.
func marshal(v any) ([]byte, []span, error) {
	var spans []span
	verbatim := func(enc *jsontext.Encoder, raw []byte) error {
		raw = bytes.Trim(raw, " \t\r\n")
		if len(raw) == 0 {
			return errors.ErrUnsupported // an empty value: the encoder's own rule
		}
		start := int(enc.OutputOffset())
		if err := enc.WriteValue(raw); err != nil {
			return err
		}
		spans = append(spans, span{start, int(enc.OutputOffset()), raw})
		return nil
	}
	b, err := json.Marshal(v, json.Deterministic(true), jsontext.PreserveRawStrings(true),
		json.WithMarshalers(json.JoinMarshalers(
			json.MarshalToFunc(func(enc *jsontext.Encoder, v jsontext.Value) error {
				return verbatim(enc, v)
			}),
			json.MarshalToFunc(func(enc *jsontext.Encoder, e event.Event) error {
				raw, err := e.MarshalJSON()
				if err != nil {
					return err
				}
				return verbatim(enc, raw)
			}),
		)))
	return b, spans, err
}

// splice hands emit the encoder's output b piece by piece with each span's
// held bytes in place of the reformatted ones, stopping at emit's first
// error.
func splice(b []byte, spans []span, emit func([]byte) error) error {
	prev := 0
	for _, s := range spans {
		if s.start < len(b) && (b[s.start] == ',' || b[s.start] == ':') {
			s.start++ // the delimiter WriteValue wrote before the value
		}
		if err := emit(b[prev:s.start]); err != nil {
			return err
		}
		if err := emit(s.raw); err != nil {
			return err
		}
		prev = s.end
	}
	return emit(b[prev:])
}

// Challenge is the WWW-Authenticate value of every 401 (RFC 6750).
const Challenge = `Bearer realm="tally"`

// The shared cases: every handler that meets one of these answers with the
// same status, code, title and detail style (a sentence ending in a period).

// Unauthorized is the answer to a request with no or an unknown bearer
// token: 401, code unauthorized (Write adds the challenge).
func Unauthorized() Details {
	return New(CodeUnauthorized,
		"This route needs a bearer token from the credentials file (Authorization: Bearer <token>).")
}

// Forbidden is the answer to a known credential that may not call the
// route: 403, code forbidden; detail says why.
func Forbidden(detail string) Details {
	return New(CodeForbidden, detail)
}

// BodyTooLarge is the answer to a body over the cap of limit bytes: 413,
// code body_too_large. Nothing was stored.
func BodyTooLarge(limit int64) Details {
	return New(CodeBodyTooLarge,
		fmt.Sprintf("The body is larger than %d bytes (as sent or decoded), this server's cap; nothing was stored.", limit))
}

// UnsupportedMediaType is the answer to a body whose Content-Type is not
// JSON: 415, code unsupported_media_type, one problem of the body as a whole
// (member "") with rule contentMediaType.
func UnsupportedMediaType() Details {
	return New(CodeUnsupportedMediaType,
		"The body must be JSON: send Content-Type: application/json, or none.",
		event.Problem{Member: "", Rule: event.RuleContentMediaType, Message: "the body's Content-Type must be JSON: application/json, another */json type, or a +json type"})
}

// NotFound is the answer when nothing is stored under the request's path,
// or no route matches it: 404, code not_found; detail says which.
func NotFound(detail string) Details {
	return New(CodeNotFound, detail)
}

// MethodNotAllowed is the answer to a method a path does not serve: 405,
// code method_not_allowed; the caller sets Allow.
func MethodNotAllowed(detail string) Details {
	return New(CodeMethodNotAllowed, detail)
}

// InvalidParameter is the answer to malformed query or path parameters:
// 400, code invalid_parameter, listing every problem.
func InvalidParameter(members ...event.Problem) Details {
	return New(CodeInvalidParameter,
		"The request's parameters break the rules listed in errors.", members...)
}

// UnknownParameters returns one problem for each query parameter of q whose
// name is not in known, in name order: member "/" + the name, rule
// [event.RuleAdditionalProperties], and a message listing what the
// operation takes. It is nil when every name is known. Both HTTP adapters
// refuse unknown parameters with it (the existing-clients rules: nothing silently ignored),
// joined with the other problems of the same request's parameters so that
// an answer lists every problem at once (the one-API-shape rules, Errors).
//
// The answer stays small whatever the query: at most [MaxParameterProblems]
// names are listed (then one problem, member "/", says how many more), and
// a name longer than [MaxParameterName] bytes is cut there, marked "…".
func UnknownParameters(q url.Values, known []string) []event.Problem {
	var ps []event.Problem
	names := slices.Sorted(maps.Keys(q))
	unknown := 0
	for _, name := range names {
		if slices.Contains(known, name) {
			continue
		}
		unknown++
		if len(ps) == MaxParameterProblems {
			continue
		}
		// A name that is not UTF-8 (?%AA=1) is named with U+FFFD in its
		// place: the problem body must stay valid JSON.
		name = strings.ToValidUTF8(name, "\uFFFD")
		if len(name) > MaxParameterName {
			cut := MaxParameterName
			for cut > 0 && !utf8.RuneStart(name[cut]) {
				cut--
			}
			name = name[:cut] + "…"
		}
		msg := "is not a parameter of this operation (it takes none)"
		if len(known) > 0 {
			msg = "is not a parameter of this operation (it takes " + strings.Join(known, ", ") + ")"
		}
		ps = append(ps, event.Problem{Member: "/" + name, Rule: event.RuleAdditionalProperties, Message: msg})
	}
	if unknown > len(ps) {
		ps = append(ps, event.Problem{Member: "/", Rule: event.RuleAdditionalProperties,
			Message: fmt.Sprintf("and %d more parameters this operation does not take", unknown-len(ps))})
	}
	return ps
}

// MaxParameterProblems is how many unknown query parameters
// [UnknownParameters] names in one answer.
const MaxParameterProblems = 20

// MaxParameterName is the longest parameter name, in bytes, that an answer
// echoes whole.
const MaxParameterName = 64

// ParseQuery checks that r's query string parses: net/url refuses more than
// 10,000 parameters and malformed escapes, and [url.URL.Query] drops that
// error along with every parameter, which would answer a filtered route
// unfiltered. It returns nil, or the problem to answer 400
// invalid_parameter with: member "" (the query as a whole), rule
// [event.RuleFormat].
func ParseQuery(r *http.Request) []event.Problem {
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		msg := err.Error()
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return []event.Problem{{Member: "", Rule: event.RuleFormat,
			Message: "the query string cannot be parsed (" + strings.ToValidUTF8(msg, "") + "); nothing was read or stored"}}
	}
	return nil
}

// RepeatedParameters returns one problem for each parameter of q named in
// single (the parameters a route reads as one value) that is given more
// than once, in name order: member "/" + the name, rule
// [event.RuleDuplicateMember]. Reading only the first value would answer
// as if the others were honoured (project_id=a&project_id=b), so both
// HTTP adapters refuse it, 400 invalid_parameter, beside the other
// problems of the request's parameters.
func RepeatedParameters(q url.Values, single []string) []event.Problem {
	var ps []event.Problem
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if len(q[name]) > 1 && slices.Contains(single, name) {
			ps = append(ps, event.Problem{Member: "/" + name, Rule: event.RuleDuplicateMember,
				Message: fmt.Sprintf("is given %d times; this operation takes one value", len(q[name]))})
		}
	}
	return ps
}

// Internal is the answer to a failure of the server (the store, a bug):
// 500, code internal, with generic text; the handler logs the error itself.
func Internal() Details {
	return New(CodeInternal,
		"The server could not complete the request; the error is logged.")
}

// ClientGone reports whether err is only the request's client having gone
// away (its context cancelled, as net/http does when the connection
// closes). Such a request needs no answer and is not a server failure:
// handlers log it below ERROR and write nothing.
func ClientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && errors.Is(err, context.Canceled)
}
