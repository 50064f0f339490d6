package correlate

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
)

// ErrNoOrganization is returned when a [Caller] has no organization: the
// caller of the library made a mistake, not the client.
var ErrNoOrganization = errors.New("correlate: caller has no organization")

// ErrInvalidCaller is returned when a [Caller]'s Organization or User is not
// valid UTF-8 or holds NUL: neither could be stored (PostgreSQL refuses
// both), so every store refuses the call alike, before any write. Like
// [ErrNoOrganization], it is the library caller's mistake, not the client's.
var ErrInvalidCaller = errors.New("correlate: invalid caller")

// check returns [ErrNoOrganization] or [ErrInvalidCaller] for a caller no
// operation accepts, else nil.
func (c Caller) check() error {
	if c.Organization == "" {
		return ErrNoOrganization
	}
	for _, f := range []struct{ name, v string }{{"organization", c.Organization}, {"user", c.User}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidCaller, f.name)
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: %s holds NUL", ErrInvalidCaller, f.name)
		}
	}
	return nil
}

// problems collects the problems of one payload or query; err returns them
// as tally's one validation error, an [*event.ValidationError] matching
// [event.ErrInvalid].
type problems []event.Problem

func (ps *problems) add(member, rule, format string, args ...any) {
	*ps = append(*ps, event.Problem{Member: member, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) has(member string) bool {
	for _, p := range ps {
		if p.Member == member {
			return true
		}
	}
	return false
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &event.ValidationError{Problems: ps}
}

// The length bounds of a payload, in characters (Unicode code points), as
// maxLength counts them in Meshery's event schema (docs/decisions.md, Length
// bounds of correlated events), so a client validating against that schema
// is never refused. The two members an index holds, correlationKey (the
// unique index of open events) and idempotencyKey (the key table's primary
// key), need no separate byte bound: 255 characters are at most 1020 bytes of
// UTF-8, well within PostgreSQL's btree entry limit (about 2700 bytes).
const (
	// MaxCategoryLen bounds category and action.
	MaxCategoryLen = 500
	// MaxDescriptionLen bounds description.
	MaxDescriptionLen = 5000
	// MaxKeyLen bounds correlationKey, idempotencyKey, source and type.
	MaxKeyLen = 255
)

// Validate checks every field rule and returns an [*event.ValidationError]
// (matching [event.ErrInvalid]) listing every problem, or nil:
//
//   - category and action required, at most 500 characters; description
//     at most 5000 characters;
//   - severity, when set, one of [Severities];
//   - correlationKey, type and idempotencyKey 1 to 255 characters; source
//     an RFC 3986 URI-reference of 1 to 255 characters, as net/url (the
//     parser of the CloudEvents Go SDK) reads it, with brackets only around
//     an IP literal and a port of digits; specversion exactly "1.0";
//   - traceId 32 and parentId 16 lower-case hex digits, not all zeros (W3C
//     Trace Context);
//   - occurrenceCount at least 1 (no upper bound below 2^63);
//   - date-times between years 1 and 9999; lastSeenAt not before
//     firstSeenAt (docs/decisions.md, Times that contradict each other);
//   - every string valid UTF-8 without NUL; metadata, when set, a JSON
//     object; no Extra member named like a listed member.
//
// Lengths count characters (Unicode code points), see [MaxKeyLen]. A
// problem's Rule is one of the event.Rule* constants. A Go string field
// left "" counts as omitted.
func (p Payload) Validate() error {
	var ps problems
	p.validate(&ps)
	return ps.err()
}

func (p Payload) validate(ps *problems) {
	p.validateCore(ps)
	validateMetadata(ps, p.Metadata)
	ps.optText("/correlationKey", p.CorrelationKey, MaxKeyLen)
	if p.OccurrenceCount != nil && *p.OccurrenceCount < 1 {
		ps.add("/occurrenceCount", event.RuleMinimum, "must be an integer of at least 1")
	}
	p.validateTimes(ps)
	p.validateCloudEvent(ps)
	p.validateTrace(ps)
	ps.optText("/idempotencyKey", p.IdempotencyKey, MaxKeyLen)
	validateExtra(ps, p.Extra)
}

// text checks the string v of member: valid UTF-8 without NUL, at least
// minLen bytes and, when maxLen is not 0, at most maxLen characters. It
// reports whether v passed.
func (ps *problems) text(member, v string, minLen, maxLen int) bool {
	switch {
	case !utf8.ValidString(v):
		ps.add(member, event.RuleUTF8, "must be valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		ps.add(member, event.RuleNUL, "must not contain NUL")
	case len(v) < minLen:
		ps.add(member, event.RuleRequired, "is required")
	case maxLen > 0 && utf8.RuneCountInString(v) > maxLen:
		ps.add(member, event.RuleMaxLength, "must be at most %d characters (is %d)", maxLen, utf8.RuneCountInString(v))
	default:
		return true
	}
	return false
}

// optText is problems.text for an optional member of 1 to maxLen
// characters: "" (omitted) is not checked, and reports false.
func (ps *problems) optText(member, v string, maxLen int) bool {
	if v == "" {
		return false
	}
	return ps.text(member, v, 1, maxLen)
}

// validateCore checks the members that say what happened: owner,
// systemId, actedUpon and operationId (text), category and action
// (required, at most [MaxCategoryLen] characters), severity (one of
// [Severities] when set) and description (at most [MaxDescriptionLen]).
func (p Payload) validateCore(ps *problems) {
	ps.text("/owner", p.Owner, 0, 0)
	ps.text("/systemId", p.SystemID, 0, 0)
	ps.text("/actedUpon", p.ActedUpon, 0, 0)
	ps.text("/operationId", p.OperationID, 0, 0)
	ps.text("/category", p.Category, 1, MaxCategoryLen)
	ps.text("/action", p.Action, 1, MaxCategoryLen)
	if p.Severity != "" && !p.Severity.Valid() {
		ps.add("/severity", event.RuleEnum, "must be one of %s", strings.Join(severityNames(), ", "))
	}
	if p.Description != nil {
		ps.text("/description", *p.Description, 0, MaxDescriptionLen)
	}
}

// validateMetadata checks metadata, when set: one strict JSON object.
func validateMetadata(ps *problems, m jsontext.Value) {
	switch {
	case m == nil:
	case !m.IsValid():
		// Strict JSON (RFC 7493: valid UTF-8, no member twice), as
		// DecodePayload reads it: a Go caller's raw value gets the same
		// rule, so no store keeps what another would refuse.
		ps.add("/metadata", event.RuleSyntax, "must be one valid JSON object (valid UTF-8, no member given twice)")
	case m.Kind() != '{':
		ps.add("/metadata", event.RuleType, "must be a JSON object")
	}
}

// validateTimes checks firstSeenAt, lastSeenAt and resolvedAt, each within
// range when set, then that lastSeenAt is not before firstSeenAt.
func (p Payload) validateTimes(ps *problems) {
	first := validTime(ps, "/firstSeenAt", p.FirstSeenAt)
	last := validTime(ps, "/lastSeenAt", p.LastSeenAt)
	validTime(ps, "/resolvedAt", p.ResolvedAt)
	// docs/decisions.md, Times that contradict each other in one payload:
	// "lastSeenAt before firstSeenAt ...: 400 naming the later member".
	if first && last && p.LastSeenAt.Before(*p.FirstSeenAt) {
		ps.add("/lastSeenAt", event.RuleMinimum, "must not be before firstSeenAt (%s)", p.FirstSeenAt.UTC().Format(time.RFC3339Nano))
	}
}

// validateCloudEvent checks the members CloudEvents names: source (a URI
// reference, see [IsURIReference]) and type, each 1 to [MaxKeyLen]
// characters, and specversion ("1.0").
func (p Payload) validateCloudEvent(ps *problems) {
	if ps.optText("/source", p.Source, MaxKeyLen) && !IsURIReference(p.Source) {
		ps.add("/source", event.RuleFormat, "must be a URI reference (RFC 3986): brackets only around an IP literal, a port of digits")
	}
	ps.optText("/type", p.Type, MaxKeyLen)
	if p.Specversion != "" && p.Specversion != "1.0" {
		ps.add("/specversion", event.RuleEnum, `must be "1.0"`)
	}
}

// validateTrace checks the W3C Trace Context members, when set: traceId
// 32 and parentId 16 lower-case hex digits, not all zeros.
func (p Payload) validateTrace(ps *problems) {
	if p.TraceID != "" && !isTraceHex(p.TraceID, 32) {
		ps.add("/traceId", event.RuleFormat, "must be 32 lower-case hex digits, not all zeros (W3C trace-id)")
	}
	if p.ParentID != "" && !isTraceHex(p.ParentID, 16) {
		ps.add("/parentId", event.RuleFormat, "must be 16 lower-case hex digits, not all zeros (W3C parent-id)")
	}
}

// validateExtra checks the members no field names, in the order of their
// names: none named like a listed member, each name text without NUL, each
// value valid JSON.
func validateExtra(ps *problems, extra map[string]jsontext.Value) {
	for _, name := range sortedKeys(extra) {
		m := event.Pointer(name)
		switch {
		case isMember(name):
			ps.add(m, event.RuleReserved, "names a listed member; set the field instead")
		case !utf8.ValidString(name):
			ps.add(m, event.RuleUTF8, "member name must be valid UTF-8")
		case strings.IndexByte(name, 0) >= 0:
			ps.add(m, event.RuleNUL, "member name must not contain NUL")
		case !extra[name].IsValid():
			ps.add(m, event.RuleSyntax, "must be valid JSON")
		}
	}
}

func severityNames() []string {
	var s []string
	for _, v := range Severities() {
		s = append(s, string(v))
	}
	return s
}

// validTime reports whether t is set and within range, adding a problem
// when it is set and out of range.
func validTime(ps *problems, member string, t *time.Time) bool {
	if t == nil {
		return false
	}
	// The zero instant (0001-01-01T00:00:00Z) is Go's "no time": an
	// event could not tell it from an absent member, so it is out of range.
	if y := t.UTC().Year(); y < 1 || y > 9999 || t.IsZero() {
		ps.add(member, event.RuleFormat, "must be after 0001-01-01T00:00:00Z and before year 10000")
		return false
	}
	return true
}

func isTraceHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '0':
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}

// IsURIReference reports whether s is an RFC 3986 URI-reference, the type
// event-correlation.md gives source (docs/decisions.md, source: "A real RFC 3986
// URI-reference (brackets only around an IP literal, a port of digits),
// checked as the CloudEvents SDKs would parse it"): only the characters and
// percent-escapes RFC 3986 allows, a well-formed scheme when there is one,
// accepted by net/url's parser (which the CloudEvents Go SDK uses for
// source, and which checks an IP literal and the port), and brackets only
// around the IP literal of the host. "http://[::1]/x", "/apicurio-registry",
// "meshery-adapter-istio" and "urn:uuid:…" are URI-references;
// "http://[bad", "//host:port/x" and any bracket outside the host (in a
// path, query or fragment) are not.
func IsURIReference(s string) bool {
	return uriCharsValid(s) && strings.Count(s, "#") <= 1 && uriSchemeValid(s) && uriBracketsInHost(s)
}

// uriCharsValid reports whether s holds only the characters RFC 3986
// allows (unreserved, gen-delims and sub-delims) and percent-escapes of two
// hex digits.
func uriCharsValid(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isURIChar(c):
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

// isURIChar reports whether c is a letter, a digit or one of the
// delimiters and unreserved marks of RFC 3986 (not '%').
func isURIChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0
}

// uriSchemeValid reports whether the scheme of s, if any, is well formed:
// a colon before any '/', '?' or '#' starts a scheme, which must begin with
// a letter and hold only letters, digits, '+', '-' and '.'.
func uriSchemeValid(s string) bool {
	end := strings.IndexAny(s, "/?#")
	if end < 0 {
		end = len(s)
	}
	i := strings.IndexByte(s[:end], ':')
	if i < 0 {
		return true
	}
	if i == 0 || !isLetter(s[0]) {
		return false
	}
	for j := 1; j < i; j++ {
		if c := s[j]; !isLetter(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// uriBracketsInHost reports whether net/url's parser accepts s (it checks
// an IP literal and the port) and every bracket of s is one of the host's:
// RFC 3986 allows '[' and ']' only around an IP literal.
func uriBracketsInHost(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	return strings.Count(s, "[") == strings.Count(u.Host, "[") && strings.Count(s, "]") == strings.Count(u.Host, "]")
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
