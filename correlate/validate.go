package correlate

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every [*ValidationError]: a payload
// that breaks a field rule of event-correlation.md (Fields) or of issue 4's
// validation list. A refused create records nothing and binds no key.
var ErrInvalid = errors.New("correlate: invalid payload")

// ErrNoOrganization is returned when a [Caller] has no organization: the
// caller of the library made a mistake, not the client.
var ErrNoOrganization = errors.New("correlate: caller has no organization")

// Problem is one broken rule.
type Problem struct {
	// Member is a JSON Pointer (RFC 6901) into the payload, such as
	// "/traceId"; "" names the payload as a whole.
	Member string `json:"member"`
	// Rule is the short name of the rule: syntax, duplicate, type, required,
	// minLength, maxLength, minimum, integer, range, format, enum, utf8, nul,
	// reserved.
	Rule string `json:"rule"`
	// Message says what is wrong, in a sentence.
	Message string `json:"message"`
}

// ValidationError lists every problem of a payload at once, in member order.
// It matches [ErrInvalid] with errors.Is; inspect it with errors.As.
type ValidationError struct {
	Problems []Problem `json:"problems"`
}

// Error lists the problems in one line: "member: message; …".
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("correlate: invalid payload: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		if p.Member != "" {
			b.WriteString(p.Member)
			b.WriteString(": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

type problems []Problem

func (ps *problems) add(member, rule, format string, args ...any) {
	*ps = append(*ps, Problem{Member: member, Rule: rule, Message: fmt.Sprintf(format, args...)})
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
	return &ValidationError{Problems: ps}
}

// Validate checks every field rule and returns a [*ValidationError] listing
// every problem, or nil:
//
//   - category and action required, at most 500 bytes; description at most
//     5000 bytes;
//   - severity, when set, one of [Severities];
//   - correlationKey, type and idempotencyKey 1 to 255 bytes; source a
//     URI reference of 1 to 255 bytes; specversion exactly "1.0";
//   - traceId 32 and parentId 16 lower-case hex digits, not all zeros (W3C
//     Trace Context);
//   - occurrenceCount at least 1 (no upper bound below 2^63);
//   - date-times between years 1 and 9999;
//   - every string valid UTF-8 without NUL; metadata, when set, a JSON
//     object; no Extra member named like a listed member.
//
// Lengths count bytes of UTF-8. A Go string field left "" counts as omitted.
func (p Payload) Validate() error {
	var ps problems
	p.validate(&ps)
	return ps.err()
}

func (p Payload) validate(ps *problems) {
	str := func(member, v string, minLen, maxLen int) bool {
		switch {
		case !utf8.ValidString(v):
			ps.add(member, "utf8", "must be valid UTF-8")
		case strings.IndexByte(v, 0) >= 0:
			ps.add(member, "nul", "must not contain NUL")
		case len(v) < minLen:
			ps.add(member, "required", "is required")
		case maxLen > 0 && len(v) > maxLen:
			ps.add(member, "maxLength", "must be at most %d bytes (is %d)", maxLen, len(v))
		default:
			return true
		}
		return false
	}
	opt := func(member, v string, maxLen int) bool {
		if v == "" {
			return false
		}
		return str(member, v, 1, maxLen)
	}
	str("/owner", p.Owner, 0, 0)
	str("/systemId", p.SystemID, 0, 0)
	str("/actedUpon", p.ActedUpon, 0, 0)
	str("/operationId", p.OperationID, 0, 0)
	str("/category", p.Category, 1, 500)
	str("/action", p.Action, 1, 500)
	if p.Severity != "" && !p.Severity.Valid() {
		ps.add("/severity", "enum", "must be one of %s", strings.Join(severityNames(), ", "))
	}
	if p.Description != nil {
		str("/description", *p.Description, 0, 5000)
	}
	switch {
	case p.Metadata == nil:
	case !p.Metadata.IsValid():
		// Strict JSON (RFC 7493: valid UTF-8, no member twice), as
		// DecodePayload reads it: a Go caller's raw value gets the same
		// rule, so no store keeps what another would refuse.
		ps.add("/metadata", "syntax", "must be one valid JSON object (valid UTF-8, no member given twice)")
	case p.Metadata.Kind() != '{':
		ps.add("/metadata", "type", "must be a JSON object")
	}
	opt("/correlationKey", p.CorrelationKey, 255)
	if p.OccurrenceCount != nil && *p.OccurrenceCount < 1 {
		ps.add("/occurrenceCount", "minimum", "must be an integer of at least 1")
	}
	validTime(ps, "/firstSeenAt", p.FirstSeenAt)
	validTime(ps, "/lastSeenAt", p.LastSeenAt)
	validTime(ps, "/resolvedAt", p.ResolvedAt)
	if opt("/source", p.Source, 255) && !isURIReference(p.Source) {
		ps.add("/source", "format", "must be a URI reference (RFC 3986)")
	}
	opt("/type", p.Type, 255)
	if p.Specversion != "" && p.Specversion != "1.0" {
		ps.add("/specversion", "enum", `must be "1.0"`)
	}
	if p.TraceID != "" && !isTraceHex(p.TraceID, 32) {
		ps.add("/traceId", "format", "must be 32 lower-case hex digits, not all zeros (W3C trace-id)")
	}
	if p.ParentID != "" && !isTraceHex(p.ParentID, 16) {
		ps.add("/parentId", "format", "must be 16 lower-case hex digits, not all zeros (W3C parent-id)")
	}
	opt("/idempotencyKey", p.IdempotencyKey, 255)
	for _, name := range sortedKeys(p.Extra) {
		m := "/" + escapePointer(name)
		if isMember(name) {
			ps.add(m, "reserved", "names a listed member; set the field instead")
		} else if !utf8.ValidString(name) {
			ps.add(m, "utf8", "member name must be valid UTF-8")
		} else if strings.IndexByte(name, 0) >= 0 {
			ps.add(m, "nul", "member name must not contain NUL")
		} else if !p.Extra[name].IsValid() {
			ps.add(m, "syntax", "must be valid JSON")
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

func validTime(ps *problems, member string, t *time.Time) {
	if t == nil {
		return
	}
	// The zero instant (0001-01-01T00:00:00Z) is Go's "no time": an
	// event could not tell it from an absent member, so it is out of range.
	if y := t.UTC().Year(); y < 1 || y > 9999 || t.IsZero() {
		ps.add(member, "range", "must be after 0001-01-01T00:00:00Z and before year 10000")
	}
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

// isURIReference checks the characters and percent-escapes of RFC 3986's
// URI-reference, and that a scheme, when present, is well formed.
func isURIReference(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	if strings.Count(s, "#") > 1 {
		return false
	}
	// A colon before any '/', '?' or '#' starts a scheme, which must begin
	// with a letter and hold only letters, digits, '+', '-' and '.'.
	end := strings.IndexAny(s, "/?#")
	if end < 0 {
		end = len(s)
	}
	if i := strings.IndexByte(s[:end], ':'); i >= 0 {
		if i == 0 {
			return false
		}
		for j := 0; j < i; j++ {
			c := s[j]
			letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
			if j == 0 && !letter || !letter && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func escapePointer(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
