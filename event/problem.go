package event

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// The rules a [Problem] can name: tally's one vocabulary of refusals, used
// by this package, by correlate (createEvent payloads), by ingest (query
// parameters and refusal reasons) and by the HTTP problem bodies. A rule is
// spelled as the JSON Schema keyword (draft 2020-12) that states it where
// one exists; the rest are single lowerCamelCase words in the same style.
const (
	// JSON Schema keywords.
	RuleRequired             = "required"             // a member that must be set is missing or empty
	RuleType                 = "type"                 // a member has the wrong JSON kind (or is not an integer)
	RuleFormat               = "format"               // a date-time, URI reference, trace id or cursor is malformed
	RuleEnum                 = "enum"                 // not one of a fixed list of values
	RulePattern              = "pattern"              // a string does not match its pattern
	RuleMinLength            = "minLength"            // a string is shorter than its bound
	RuleMaxLength            = "maxLength"            // a string is longer than its bound
	RuleMinimum              = "minimum"              // a number or time is below its bound (lastSeenAt before firstSeenAt)
	RuleMaximum              = "maximum"              // a number or time is above its bound
	RuleAdditionalProperties = "additionalProperties" // a member the object does not allow (names are case-sensitive)
	RuleContentMediaType     = "contentMediaType"     // a body of a media type the route does not read
	RuleConst                = "const"                // must equal another value (the Idempotency-Key header and the body's idempotencyKey)

	// tally's own rules, where JSON Schema has no keyword.
	RuleSyntax          = "syntax"          // not valid JSON
	RuleDuplicateMember = "duplicateMember" // a member given twice in one object, at any depth (or a size-name row whose key an earlier row holds)
	RuleUTF8            = "utf8"            // a name or string is not valid UTF-8
	RuleNUL             = "nul"             // a NUL character, raw or \u0000
	RuleDepth           = "depth"           // nesting deeper than MaxDepth
	RuleReserved        = "reserved"        // a value or name kept for another meaning (platform "meta", a listed member in Extra)
	RuleScope           = "scope"           // a member outside the caller's scope
	RuleSchema          = "schema"          // a size schema refuses the value, or none is registered
	RuleNumberRange     = "numberRange"     // a size number outside the range the size-schema validator judges (ingest.MaxNumberDigits, ingest.MaxNumberExponent)
	RuleConflict        = "conflict"        // an event_id and timestamp already taken by an event of another platform, cloud, resource_type or resource_id
	RuleInternal        = "internal"        // a check failed inside the server on this item (a recovered panic); the item is refused, the rest proceeds
)

// ErrInvalid is matched (errors.Is) by every [*ValidationError]: input from
// a client that breaks a rule (an event, a correlated-event payload, a
// query or path parameter), as opposed to a failure of the caller's own or
// of a store. It is the one sentinel for that idea in the library.
var ErrInvalid = errors.New("invalid input")

// Problem is one broken rule (STYLE.md, Errors): where, which rule, and
// what it asks for. Its JSON form is {"member", "rule", "message"}, the
// form every problem body of the HTTP API lists under "errors".
type Problem struct {
	// Member is a JSON Pointer (RFC 6901) to the member: into the event
	// ("/payload/state"), into a createEvent payload ("/traceId"), or, for a
	// query or path parameter, into the request's parameters taken as one
	// object, "/" + the parameter's name as the HTTP API spells it
	// ("/limit", "/resource_type"). "" names the item or body as a whole. It
	// is valid UTF-8 without NUL: a member name holding either is named by
	// its object.
	Member string `json:"member"`
	// Rule is one of the Rule* constants, or, in a size-schema refusal, the
	// JSON Schema keyword that failed.
	Rule string `json:"rule"`
	// Message says what the rule asks for, in words. It never quotes back a
	// value longer than the member's bound.
	Message string `json:"message"`
}

// String renders the problem as "<member>: <rule>: <message>", the form of a
// refusal reason after its kind (docs/decisions.md, Refusal reasons). The member
// of the whole item is the empty pointer, so that reads ": <rule>: …".
func (p Problem) String() string {
	return p.Member + ": " + p.Rule + ": " + p.Message
}

// ValidationError is the refusal of one input: every problem found, in a
// fixed order (the order of the members in the spec), never empty. It is
// the one validation error of tally: [Decode] and [Validate] return it, as
// do correlate (a createEvent payload, a status, a listing query) and
// ingest (the parameters of a listing, every bad one at once). Inspect it
// with errors.As, or test it with errors.Is(err, [ErrInvalid]).
type ValidationError struct {
	Problems []Problem
}

// Error joins the problems, each as [Problem.String], with "; ".
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Is reports whether target is [ErrInvalid].
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func single(member, rule, msg string) error {
	return &ValidationError{Problems: []Problem{{Member: SafePointer(member), Rule: rule, Message: msg}}}
}

// MaxMemberLen bounds a [Problem.Member] in bytes. A longer pointer (a
// member nested thousands deep, or a huge unknown member name) is cut at a
// token boundary and ends in "/…", so the rule and message of a refusal
// always survive in a bounded reason.
const MaxMemberLen = 256

// SafePointer returns the JSON Pointer p as a [Problem.Member] may hold it:
// cut before the first reference token that holds a NUL character or
// invalid UTF-8, so it names the object holding the offending member name
// (a problem's member is stored and logged as text, and PostgreSQL text
// holds neither), and bounded to [MaxMemberLen] bytes, cut at a token
// boundary and ending in "/…". It never fails; "" stays "".
func SafePointer(p string) string {
	p = validPointer(p)
	if len(p) <= MaxMemberLen {
		return p
	}
	cut := strings.LastIndexByte(p[:MaxMemberLen-len("/…")+1], '/')
	if cut <= 0 {
		return "/…"
	}
	return p[:cut] + "/…"
}

func validPointer(p string) string {
	for i := 0; i < len(p); {
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			j = len(p)
		} else {
			j += i + 1
		}
		if tok := p[i:j]; strings.IndexByte(tok, 0) >= 0 || !utf8.ValidString(tok) {
			return p[:i]
		}
		i = j
	}
	return p
}

// Pointer returns the JSON Pointer (RFC 6901) of the member named name of
// the top-level object: "/" + name with "~" written "~0" and "/" written
// "~1".
func Pointer(name string) string {
	return "/" + strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
