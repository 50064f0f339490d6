package correlate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/event"
)

// docs/decisions.md, source: "A real RFC 3986 URI-reference (brackets only
// around an IP literal, a port of digits), checked as the CloudEvents SDKs
// would parse it".
func TestIsURIReference(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", true},
		{"meshery-adapter-istio", true},
		{"/apicurio-registry", true},
		{"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66", true},
		{"http://[::1]/x", true},
		{"http://[::1]:8080/x?q=1#f", true},
		{"svn+ssh://h/x", true},
		{"a1.b-c+d:x", true},
		{"a/b:c", true}, // a colon after the first '/' starts no scheme
		{"x?y:z", true}, // nor after a '?'
		{"#f:g", true},  // nor after a '#'
		{"/sensors/tn%2Falerts", true},
		{"%41%7e", true},
		{"!$&'()*+,;=-._~@", true},

		{"meshery server", false}, // a character RFC 3986 does not allow
		{"a\x00b", false},
		{"é", false},
		{"a%zz", false},
		{"a%4", false},
		{"a%", false},
		{"%4g", false},
		{"a#b#c", false}, // two fragments
		{":x", false},    // an empty scheme
		{"1http://h/", false},
		{"+a:x", false},
		{"ht_tp://h/", false},
		{"http://[bad", false},
		{"a[b]", false},
		{"http://h/a[b]", false},
		{"/x?q=[1]", false},
		{"http://[1.2.3.4]/", false},
		{"//host:port/x", false},
	}
	for _, tt := range tests {
		if got := correlate.IsURIReference(tt.in); got != tt.want {
			t.Errorf("IsURIReference(%q) = %t, want %t", tt.in, got, tt.want)
		}
	}
}

// Validate reports every problem of a Go-built payload at once, in the
// order of the members, each with its message.
func TestValidateEveryProblemInMemberOrder(t *testing.T) {
	first := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := correlate.Payload{
		Owner:           "o\xff",
		SystemID:        "s\x00",
		ActedUpon:       "a\xff",
		OperationID:     "op\x00",
		Category:        "",
		Action:          strings.Repeat("é", correlate.MaxCategoryLen+1),
		Severity:        "fatal",
		Description:     new(strings.Repeat("x", correlate.MaxDescriptionLen+1)),
		Metadata:        jsontext.Value(`[1]`),
		CorrelationKey:  strings.Repeat("k", correlate.MaxKeyLen+1),
		OccurrenceCount: new(int64(0)),
		FirstSeenAt:     &first,
		LastSeenAt:      new(first.Add(-time.Microsecond)),
		ResolvedAt:      new(time.Time{}),
		Source:          "a b",
		Type:            "t\x00",
		Specversion:     "0.3",
		TraceID:         "00000000000000000000000000000000",
		ParentID:        "00F067AA0BA902B7",
		IdempotencyKey:  "\xff",
		Extra: map[string]jsontext.Value{
			"z-broken": jsontext.Value(`{`),
			"category": jsontext.Value(`"c"`),
			"a\x00":    jsontext.Value(`1`),
			"b\xff":    jsontext.Value(`1`),
		},
	}
	want := []event.Problem{
		{Member: "/owner", Rule: event.RuleUTF8, Message: "must be valid UTF-8"},
		{Member: "/systemId", Rule: event.RuleNUL, Message: "must not contain NUL"},
		{Member: "/actedUpon", Rule: event.RuleUTF8, Message: "must be valid UTF-8"},
		{Member: "/operationId", Rule: event.RuleNUL, Message: "must not contain NUL"},
		{Member: "/category", Rule: event.RuleRequired, Message: "is required"},
		{Member: "/action", Rule: event.RuleMaxLength, Message: "must be at most 500 characters (is 501)"},
		{Member: "/severity", Rule: event.RuleEnum, Message: "must be one of emergency, alert, critical, error, warning, informational, debug, success"},
		{Member: "/description", Rule: event.RuleMaxLength, Message: "must be at most 5000 characters (is 5001)"},
		{Member: "/metadata", Rule: event.RuleType, Message: "must be a JSON object"},
		{Member: "/correlationKey", Rule: event.RuleMaxLength, Message: "must be at most 255 characters (is 256)"},
		{Member: "/occurrenceCount", Rule: event.RuleMinimum, Message: "must be an integer of at least 1"},
		{Member: "/resolvedAt", Rule: event.RuleFormat, Message: "must be after 0001-01-01T00:00:00Z and before year 10000"},
		{Member: "/lastSeenAt", Rule: event.RuleMinimum, Message: "must not be before firstSeenAt (2026-03-01T12:00:00Z)"},
		{Member: "/source", Rule: event.RuleFormat, Message: "must be a URI reference (RFC 3986): brackets only around an IP literal, a port of digits"},
		{Member: "/type", Rule: event.RuleNUL, Message: "must not contain NUL"},
		{Member: "/specversion", Rule: event.RuleEnum, Message: `must be "1.0"`},
		{Member: "/traceId", Rule: event.RuleFormat, Message: "must be 32 lower-case hex digits, not all zeros (W3C trace-id)"},
		{Member: "/parentId", Rule: event.RuleFormat, Message: "must be 16 lower-case hex digits, not all zeros (W3C parent-id)"},
		{Member: "/idempotencyKey", Rule: event.RuleUTF8, Message: "must be valid UTF-8"},
		{Member: event.Pointer("a\x00"), Rule: event.RuleNUL, Message: "member name must not contain NUL"},
		{Member: event.Pointer("b\xff"), Rule: event.RuleUTF8, Message: "member name must be valid UTF-8"},
		{Member: "/category", Rule: event.RuleReserved, Message: "names a listed member; set the field instead"},
		{Member: "/z-broken", Rule: event.RuleSyntax, Message: "must be valid JSON"},
	}
	var ve *event.ValidationError
	if !errors.As(p.Validate(), &ve) {
		t.Fatalf("Validate: want an *event.ValidationError")
	}
	if diff := cmp.Diff(want, ve.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
