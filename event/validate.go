package event

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The bounds of canonical-event.md, Bounds. Each counts bytes of UTF-8: the
// bounds exist for the btree limit, which is in bytes.
const (
	// EventIDMaxLen bounds event_id so it fits the database column and stays
	// a usable idempotency key.
	EventIDMaxLen = 256
	// EventTypeMaxLen bounds event_type, which is indexed next to timestamp.
	EventTypeMaxLen = 512
	// IdentifierMaxLen bounds platform, cloud, resource_type, resource_id and
	// project_id, which are indexed columns.
	IdentifierMaxLen = 512
	// StateMaxLen bounds payload.state, which every projection row holds.
	StateMaxLen = 512
)

// EventTypePattern is the pattern event_type must match (canonical-event.md,
// Bounds): two or more parts of lower-case letters, digits and underscores,
// separated by dots. [Validate] checks [EventTypeMaxLen] first.
const EventTypePattern = `^[a-z0-9_]+(\.[a-z0-9_]+)+$`

// validEventType reports whether s matches [EventTypePattern], byte by
// byte: the regular expression cost about a tenth of [DecodeValidate]
// (the performance rules). TestValidEventType compares the two.
func validEventType(s string) bool {
	parts, n := 1, 0 // n counts the bytes of the current part
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if n == 0 {
				return false
			}
			parts, n = parts+1, 0
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_':
			n++
		default:
			return false
		}
	}
	return parts >= 2 && n > 0
}

// Validate checks e against the rules of canonical-event.md (Bounds, Sources
// and categories, Rules) and reports every rule it breaks at once. It returns
// nil, or a [*ValidationError] listing the problems in the order of the members:
//
//   - event_id: 1 to 256 bytes;
//   - timestamp: set;
//   - event_type: at most 512 bytes, checked before the pattern
//     [EventTypePattern] (an over-long value is never quoted back);
//   - platform, cloud, resource_type, resource_id, project_id: each 1 to 512
//     bytes; platform and cloud neither "meta" nor "partner";
//   - source: "", "collector" or "reconciliation";
//   - payload.state: at most 512 bytes; required (not absent, not null) on
//     every event except a delete;
//   - payload.size: an object when present; required (not absent, not null)
//     on a create, the category being [Categorize] of event_type;
//   - payload.provider: an object when present.
//
// Bounds count bytes of UTF-8, and the messages say bytes. A message quotes
// a value back only when it is within its bound. Each problem carries one
// of the rules [RuleRequired], [RuleMaxLength], [RulePattern],
// [RuleReserved], [RuleEnum] and [RuleType], at most one per member.
// Validate reads e only; it is safe for concurrent use.
func Validate(e *Event) error {
	if e == nil {
		return single("", RuleRequired, "there is no event (nil)")
	}
	return validate(e, true)
}

// DecodeValidate is [Decode] followed by [Validate], in one call: the path
// every ingested item takes. It returns the decoded event, or the refusal of
// whichever step failed ([*ValidationError], matching [ErrInvalid]). It is faster than
// the two calls, because it does not re-check the raw payload members Decode
// has just read strictly (valid JSON, valid UTF-8, no member twice, no NUL).
func DecodeValidate(b []byte) (Event, error) {
	e, err := Decode(b)
	if err != nil {
		return e, err
	}
	return e, validate(&e, false)
}

func validate(e *Event, checkRaw bool) error {
	var ps []Problem
	add := func(member, rule, msg string) { ps = append(ps, Problem{Member: member, Rule: rule, Message: msg}) }

	switch n := len(e.EventID); {
	case n == 0:
		add("/event_id", RuleRequired, "is required (1 to 256 bytes)")
	case n > EventIDMaxLen:
		add("/event_id", RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", EventIDMaxLen, n))
	default:
		if rule, msg := textProblem(e.EventID); rule != "" {
			add("/event_id", rule, msg)
		}
	}
	switch y := e.Timestamp.UTC().Year(); {
	case e.Timestamp.IsZero():
		add("/timestamp", RuleRequired, "is required (RFC 3339 with a zone)")
	case y < 0 || y > 9999:
		add("/timestamp", RuleFormat, "must lie in years 0000 to 9999 in UTC, as RFC 3339 writes them")
	}
	switch n := len(e.EventType); {
	case n == 0:
		add("/event_type", RuleRequired, "is required")
	case n > EventTypeMaxLen:
		add("/event_type", RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", EventTypeMaxLen, n))
	case !validEventType(e.EventType):
		add("/event_type", RulePattern, fmt.Sprintf("%q must be two or more dot-separated parts of a-z, 0-9 and _ (%s)", e.EventType, EventTypePattern))
	}
	for _, f := range [...]struct {
		path, value string
		virtual     bool
	}{
		{"/platform", e.Platform, true},
		{"/cloud", e.Cloud, true},
		{"/resource_type", e.ResourceType, false},
		{"/resource_id", e.ResourceID, false},
		{"/project_id", e.ProjectID, false},
	} {
		switch n := len(f.value); {
		case n == 0:
			add(f.path, RuleRequired, "is required (1 to 512 bytes)")
		case n > IdentifierMaxLen:
			add(f.path, RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", IdentifierMaxLen, n))
		case f.virtual && (f.value == "meta" || f.value == "partner"):
			add(f.path, RuleReserved, fmt.Sprintf("must not be %q: meta and partner name the virtual projects, which own no resources", f.value))
		default:
			if rule, msg := textProblem(f.value); rule != "" {
				add(f.path, rule, msg)
			}
		}
	}
	if e.Source != "" && !e.Source.Valid() {
		msg := "must be collector or reconciliation, or left out"
		if len(e.Source) <= IdentifierMaxLen {
			msg = fmt.Sprintf("%q %s", string(e.Source), msg)
		}
		add("/source", RuleEnum, msg)
	}

	cat := Categorize(e.EventType)
	st := e.Payload.State
	switch {
	case len(st.String()) > StateMaxLen:
		add("/payload/state", RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", StateMaxLen, len(st.String())))
	case st.Missing() && cat != CategoryDelete:
		add("/payload/state", RuleRequired, "is required on every event except a delete")
	default:
		if rule, msg := textProblem(st.String()); rule != "" {
			add("/payload/state", rule, msg)
		}
	}
	switch k := rawKind(e.Payload.Size); {
	case k != '{' && k != 0 && k != 'n':
		add("/payload/size", RuleType, "must be an object, not "+jsonKind(jsontext.Kind(k)))
	case k != '{' && cat == CategoryCreate:
		add("/payload/size", RuleRequired, "is required on a create (the full size object)")
	}
	if k := rawKind(e.Payload.Provider); k != '{' && k != 0 && k != 'n' {
		add("/payload/provider", RuleType, "must be an object, not "+jsonKind(jsontext.Kind(k)))
	}
	// A Go-built event can carry raw members Decode would never produce; they
	// must be what the encoder and the stores can keep.
	if checkRaw {
		for _, f := range [...]struct {
			path string
			raw  jsontext.Value
		}{{"/payload/size", e.Payload.Size}, {"/payload/provider", e.Payload.Provider}, {"/payload", e.Payload.Unknown}} {
			if rule, msg := rawProblem(f.raw); rule != "" {
				add(f.path, rule, msg)
			}
		}
		if k := rawKind(e.Payload.Unknown); k != 0 && k != '{' {
			add("/payload", RuleType, "unknown members must form an object, not "+jsonKind(jsontext.Kind(k)))
		} else if k == '{' {
			for _, name := range [...]string{"state", "size", "provider"} {
				if unknownHas(e.Payload.Unknown, name) {
					add("/payload/"+name, RuleDuplicateMember, "is given more than once (also among the unknown members)")
				}
			}
		}
	}

	if ps == nil {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// rawKind returns the JSON kind of a raw value: '{', '[', '"', 'n', 't',
// 'f', '0' for a number, or 0 when v is empty.
func rawKind(v jsontext.Value) byte {
	k := firstByte(v)
	switch {
	case k == 0:
		return 0
	case k == '-' || (k >= '0' && k <= '9'):
		return '0'
	}
	return k
}

// textProblem reports a string member that is not valid UTF-8 or holds a
// NUL character, which Decode refuses and PostgreSQL text cannot hold.
func textProblem(s string) (rule, msg string) {
	switch {
	case !utf8.ValidString(s):
		return RuleUTF8, "must be valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return RuleNUL, "must not contain a NUL character"
	}
	return "", ""
}

// rawProblem reports a raw member that is not one strict JSON value (RFC
// 7493: valid UTF-8, no member given twice) or holds a NUL character.
func rawProblem(v jsontext.Value) (rule, msg string) {
	if len(v) == 0 {
		return "", ""
	}
	if !v.IsValid() {
		return RuleSyntax, "must be one valid JSON value (valid UTF-8, no member given twice)"
	}
	if bytes.Contains(v, nulEscape) {
		if _, found := findNUL(v); found {
			return RuleNUL, "must not contain a NUL character (\\u0000)"
		}
	}
	return "", ""
}

// unknownHas reports whether the object of unknown members names name.
func unknownHas(obj jsontext.Value, name string) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if tok.String() == name {
			return true
		}
		if err := dec.SkipValue(); err != nil {
			return false
		}
	}
	return false
}
