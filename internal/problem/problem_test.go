package problem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/internal/problem"
)

// Tally's clients (B42Labs/tally's Reporting API, problem.go) match on the
// type urn:tally:error:<kind> and read each field error's loc and msg;
// tally's own clients read code, member and rule: a body carries both.
func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	problem.Write(w, problem.New(problem.CodeInvalidParameter, "limit: too big",
		event.Problem{Member: "/limit", Rule: event.RuleMaximum, Message: "too big"}))
	if w.Code != 400 || w.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "urn:tally:error:validation", "title": "Invalid parameter", "status": 400.0,
		"detail": "limit: too big", "code": "invalid_parameter",
		"errors": []any{map[string]any{"member": "/limit", "rule": "maximum", "message": "too big", "loc": "query.limit", "msg": "too big"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	// A body member: loc is body and the pointer's tokens, unescaped.
	d := problem.New(problem.CodeInvalidEvent, "", event.Problem{Member: "/0/a~1b~0c", Rule: event.RuleType, Message: "m"},
		event.Problem{Member: "", Rule: event.RuleSyntax, Message: "n"})
	b, err := problem.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var locs struct{ Errors []struct{ Loc string } }
	if err := json.Unmarshal(b, &locs); err != nil || len(locs.Errors) != 2 || locs.Errors[0].Loc != "body.0.a/b~c" || locs.Errors[1].Loc != "body" {
		t.Errorf("body %s (%v), want the locs body.0.a/b~c and body", b, err)
	}
	// A member inside a parameter (getEvents' filter object): loc is query,
	// the parameter's name and the member's tokens, each after a ".", as in
	// a body.
	d = problem.New(problem.CodeInvalidParameter, "", event.Problem{Member: "/filter/actedUpon", Rule: event.RuleType, Message: "m"})
	if b, err = problem.Marshal(d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &locs); err != nil || len(locs.Errors) != 1 || locs.Errors[0].Loc != "query.filter.actedUpon" {
		t.Errorf("body %s (%v), want the loc query.filter.actedUpon", b, err)
	}
	// Without member problems, there is no errors member at all.
	w = httptest.NewRecorder()
	problem.Write(w, problem.New(problem.CodeNotFound, ""))
	if b := w.Body.String(); b != `{"type":"urn:tally:error:not_found","title":"Not found","status":404,"code":"not_found"}`+"\n" {
		t.Errorf("body %s", b)
	}
}

// "One JSON writer and one set of shared error cases in
// internal/problem."
func TestSharedCases(t *testing.T) {
	type answer struct {
		Status                       int
		Code, ContentType, Challenge string
	}
	tests := []struct {
		name string
		p    problem.Details
		want answer
	}{
		{"unauthorized carries the challenge", problem.Unauthorized(), answer{401, "unauthorized", problem.ContentType, `Bearer realm="tally"`}},
		{"forbidden", problem.Forbidden("Credential \"x\" lacks the role."), answer{403, "forbidden", problem.ContentType, ""}},
		{"not found", problem.NotFound("No such event."), answer{404, "not_found", problem.ContentType, ""}},
		{"method not allowed", problem.MethodNotAllowed("POST is not allowed."), answer{405, "method_not_allowed", problem.ContentType, ""}},
		{"body too large", problem.BodyTooLarge(10), answer{413, "body_too_large", problem.ContentType, ""}},
		{"unsupported media type", problem.UnsupportedMediaType(), answer{415, "unsupported_media_type", problem.ContentType, ""}},
		{"invalid parameter", problem.InvalidParameter(event.Problem{Member: "/limit", Rule: event.RuleMaximum, Message: "too big"}), answer{400, "invalid_parameter", problem.ContentType, ""}},
		{"internal", problem.Internal(), answer{500, "internal", problem.ContentType, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			problem.Write(w, tt.p)
			var body struct{ Code, Detail string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			got := answer{w.Code, body.Code, w.Header().Get("Content-Type"), w.Header().Get("WWW-Authenticate")}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// One detail style: a sentence, capitalized, ending in a period.
			if d := body.Detail; d == "" || d[0] < 'A' || d[0] > 'Z' || !strings.HasSuffix(d, ".") {
				t.Errorf("detail %q is not a sentence", d)
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	w := httptest.NewRecorder()
	problem.WriteJSON(w, 201, map[string]any{"b": 1, "a": []int{}})
	if w.Code != 201 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("status %d, headers %v", w.Code, w.Header())
	}
	if got, want := w.Body.String(), `{"a":[],"b":1}`+"\n"; got != want {
		t.Errorf("body %q, want %q (members sorted, one final newline)", got, want)
	}
	w = httptest.NewRecorder()
	problem.WriteJSON(w, 200, func() {}) // cannot be encoded
	if w.Code != 500 || w.Header().Get("Content-Type") != problem.ContentType {
		t.Errorf("unencodable value: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
}

func TestClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	here := httptest.NewRequest("GET", "/", nil)
	wrapped := fmt.Errorf("store: %w", context.Canceled)
	for _, tt := range []struct {
		name string
		r    *http.Request
		err  error
		want bool
	}{
		{"client gone, context error", gone, wrapped, true},
		{"client gone, another error", gone, errors.New("disk on fire"), false},
		{"client here, a cancelled operation of the server's own", here, wrapped, false},
	} {
		if got := problem.ClientGone(tt.r, tt.err); got != tt.want {
			t.Errorf("%s: ClientGone = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestUnknownParameters(t *testing.T) {
	q := url.Values{"z": {"1"}, "limit": {"5"}, "a": {"x", "y"}}
	tests := []struct {
		name  string
		known []string
		want  []event.Problem
	}{
		{"every name known", []string{"a", "limit", "z"}, nil},
		{"unknown ones in name order, naming what the operation takes", []string{"limit"}, []event.Problem{
			{Member: "/a", Rule: event.RuleAdditionalProperties, Message: "is not a parameter of this operation (it takes limit)"},
			{Member: "/z", Rule: event.RuleAdditionalProperties, Message: "is not a parameter of this operation (it takes limit)"},
		}},
		{"an operation that takes none", nil, []event.Problem{
			{Member: "/a", Rule: event.RuleAdditionalProperties, Message: "is not a parameter of this operation (it takes none)"},
			{Member: "/limit", Rule: event.RuleAdditionalProperties, Message: "is not a parameter of this operation (it takes none)"},
			{Member: "/z", Rule: event.RuleAdditionalProperties, Message: "is not a parameter of this operation (it takes none)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, problem.UnknownParameters(q, tt.known)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A parameter name that is not UTF-8 (?%AA=1) is named with U+FFFD, so
// that the problem body stays valid JSON (found by FuzzUsageQuery: it was
// a 500).
func TestUnknownParametersNotUTF8(t *testing.T) {
	got := problem.UnknownParameters(url.Values{"\xaa": {"1"}}, []string{"limit"})
	want := []event.Problem{{Member: "/\uFFFD", Rule: event.RuleAdditionalProperties, Message: "is not a parameter of this operation (it takes limit)"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
