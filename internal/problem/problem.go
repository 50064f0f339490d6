// Package problem writes RFC 9457 problem details (application/problem+json),
// the one error body every tally HTTP handler answers with.
//
// A body reads:
//
//	{"type":"urn:tally:problem:invalid_event","title":"Invalid event","status":400,
//	 "detail":"…","code":"invalid_event","errors":[{"member":"/severity","message":"…"}]}
//
// code is the stable, machine-readable identifier of the problem; type is the
// same code as a URN, as RFC 9457 asks for a URI. errors lists each problem's
// member (a JSON Pointer into the request body, or a parameter name) and
// message, and is present only when there are member problems.
package problem

import (
	"encoding/json"
	"net/http"
)

// ContentType is the media type of a problem body.
const ContentType = "application/problem+json"

// Member is one problem with one member of the request.
type Member struct {
	// Member is a JSON Pointer (RFC 6901) into the body, such as
	// "/payload/state", or the name of a query parameter or header.
	Member string `json:"member"`
	// Rule is the short name of the rule broken, when known.
	Rule string `json:"rule,omitempty"`
	// Message says what is wrong, in a sentence.
	Message string `json:"message"`
}

// Details is a problem body.
type Details struct {
	Type   string   `json:"type"`
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail,omitempty"`
	Code   string   `json:"code"`
	Errors []Member `json:"errors,omitempty"`
}

// New builds a problem with the given status, stable code, title and detail.
func New(status int, code, title, detail string, members ...Member) Details {
	return Details{
		Type:   "urn:tally:problem:" + code,
		Title:  title,
		Status: status,
		Detail: detail,
		Code:   code,
		Errors: members,
	}
}

// Write sends p as the response, with its status and content type.
func Write(w http.ResponseWriter, p Details) {
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
