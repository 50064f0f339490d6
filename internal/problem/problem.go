// Package problem writes RFC 9457 problem details (application/problem+json),
// the one error body every tally HTTP handler answers with.
//
// A body reads:
//
//	{"type":"urn:tally:problem:invalid_event","title":"Invalid event","status":400,
//	 "detail":"…","code":"invalid_event","errors":[{"member":"/severity","rule":"enum","message":"…"}]}
//
// code is the stable, machine-readable identifier of the problem; type is the
// same code as a URN, as RFC 9457 asks for a URI. errors lists each problem
// as an [event.Problem], tally's one problem shape: member (a JSON Pointer
// into the request body, or "/" + the name of a query or path parameter),
// rule (an event.Rule* constant) and message; it is present only when there
// are member problems.
package problem

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
	Code   string          `json:"code"`
	Errors []event.Problem `json:"errors,omitempty"`
}

// New builds a problem with the given status, stable code, title and detail.
func New(status int, code, title, detail string, members ...event.Problem) Details {
	return Details{
		Type:   "urn:tally:problem:" + code,
		Title:  title,
		Status: status,
		Detail: detail,
		Code:   code,
		Errors: members,
	}
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
// ([Internal]) instead, which only a programming error causes. A raw JSON
// value in v (an event's payload.size, payload.provider and unknown members,
// a correlated event's metadata, a size schema) keeps its string escapes as
// stored (DECISIONS.md, Faithfulness); the encoder still drops the white
// space between its tokens.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	write(w, status, "application/json", v)
}

func write(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v, json.Deterministic(true), jsontext.PreserveRawStrings(true))
	if err != nil {
		status, contentType = http.StatusInternalServerError, ContentType
		b, _ = json.Marshal(Internal())
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Challenge is the WWW-Authenticate value of every 401 (RFC 6750).
const Challenge = `Bearer realm="tally"`

// The shared cases: every handler that meets one of these answers with the
// same status, code, title and detail style (a sentence ending in a period).

// Unauthorized is the answer to a request with no or an unknown bearer
// token: 401, code unauthorized (Write adds the challenge).
func Unauthorized() Details {
	return New(http.StatusUnauthorized, "unauthorized", "Unauthorized",
		"This route needs a bearer token from the credentials file (Authorization: Bearer <token>).")
}

// Forbidden is the answer to a known credential that may not call the
// route: 403, code forbidden; detail says why.
func Forbidden(detail string) Details {
	return New(http.StatusForbidden, "forbidden", "Forbidden", detail)
}

// BodyTooLarge is the answer to a body over the cap of limit bytes: 413,
// code body_too_large. Nothing was stored.
func BodyTooLarge(limit int64) Details {
	return New(http.StatusRequestEntityTooLarge, "body_too_large", "Body too large",
		fmt.Sprintf("The body is larger than %d bytes (as sent or decoded), this server's cap; nothing was stored.", limit))
}

// UnsupportedMediaType is the answer to a body whose Content-Type is not
// JSON: 415, code unsupported_media_type, one problem of the body as a whole
// (member "") with rule contentMediaType.
func UnsupportedMediaType() Details {
	return New(http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type",
		"The body must be JSON: send Content-Type: application/json, or none.",
		event.Problem{Member: "", Rule: event.RuleContentMediaType, Message: "the body's Content-Type must be application/json (or a +json type)"})
}

// NotFound is the answer when nothing is stored under the request's path,
// or no route matches it: 404, code not_found; detail says which.
func NotFound(detail string) Details {
	return New(http.StatusNotFound, "not_found", "Not found", detail)
}

// MethodNotAllowed is the answer to a method a path does not serve: 405,
// code method_not_allowed; the caller sets Allow.
func MethodNotAllowed(detail string) Details {
	return New(http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed", detail)
}

// InvalidParameter is the answer to malformed query or path parameters:
// 400, code invalid_parameter, listing every problem.
func InvalidParameter(members ...event.Problem) Details {
	return New(http.StatusBadRequest, "invalid_parameter", "Invalid parameter",
		"The request's parameters break the rules listed in errors.", members...)
}

// Internal is the answer to a failure of the server (the store, a bug):
// 500, code internal, with generic text; the handler logs the error itself.
func Internal() Details {
	return New(http.StatusInternalServerError, "internal", "Internal server error",
		"The server could not complete the request; the error is logged.")
}

// ClientGone reports whether err is only the request's client having gone
// away (its context cancelled, as net/http does when the connection
// closes). Such a request needs no answer and is not a server failure:
// handlers log it below ERROR and write nothing.
func ClientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && errors.Is(err, context.Canceled)
}
