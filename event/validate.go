package event

import (
	"bytes"
	"fmt"
	"strings"
	"time"
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

// validate is [Validate] without the nil check; checkRaw adds the checks of
// the raw payload members that [Decode] has already made of a decoded event.
// The problems come in the order of the members, the raw members' last.
func validate(e *Event, checkRaw bool) error {
	var ps problemList
	ps.eventID(e.EventID)
	ps.timestamp(e.Timestamp)
	ps.eventType(e.EventType)
	ps.identifiers(e)
	ps.source(e.Source)
	cat := Categorize(e.EventType)
	ps.state(e.Payload.State, cat)
	ps.size(e.Payload.Size, cat)
	ps.provider(e.Payload.Provider)
	if checkRaw {
		ps.rawMembers(&e.Payload)
	}
	if ps == nil {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// problemList collects the problems of one event, in the order found; it is
// nil while there is none.
type problemList []Problem

func (ps *problemList) add(member, rule, msg string) {
	*ps = append(*ps, Problem{Member: member, Rule: rule, Message: msg})
}

// addText adds the problem of textProblem(s) at member, if any.
func (ps *problemList) addText(member, s string) {
	if rule, msg := textProblem(s); rule != "" {
		ps.add(member, rule, msg)
	}
}

// eventID checks event_id: 1 to [EventIDMaxLen] bytes of text.
func (ps *problemList) eventID(id string) {
	switch n := len(id); {
	case n == 0:
		ps.add("/event_id", RuleRequired, "is required (1 to 256 bytes)")
	case n > EventIDMaxLen:
		ps.add("/event_id", RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", EventIDMaxLen, n))
	default:
		ps.addText("/event_id", id)
	}
}

// timestamp checks timestamp: set, and within the years RFC 3339 writes.
func (ps *problemList) timestamp(t time.Time) {
	switch y := t.UTC().Year(); {
	case t.IsZero():
		ps.add("/timestamp", RuleRequired, "is required (RFC 3339 with a zone)")
	case y < 0 || y > 9999:
		ps.add("/timestamp", RuleFormat, "must lie in years 0000 to 9999 in UTC, as RFC 3339 writes them")
	}
}

// eventType checks event_type: at most [EventTypeMaxLen] bytes, checked
// before [EventTypePattern] so an over-long value is never quoted back.
func (ps *problemList) eventType(t string) {
	switch n := len(t); {
	case n == 0:
		ps.add("/event_type", RuleRequired, "is required")
	case n > EventTypeMaxLen:
		ps.add("/event_type", RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", EventTypeMaxLen, n))
	case !validEventType(t):
		ps.add("/event_type", RulePattern, fmt.Sprintf("%q must be two or more dot-separated parts of a-z, 0-9 and _ (%s)", t, EventTypePattern))
	}
}

// identifiers checks platform, cloud, resource_type, resource_id and
// project_id, in that order.
func (ps *problemList) identifiers(e *Event) {
	ps.identifier("/platform", e.Platform, true)
	ps.identifier("/cloud", e.Cloud, true)
	ps.identifier("/resource_type", e.ResourceType, false)
	ps.identifier("/resource_id", e.ResourceID, false)
	ps.identifier("/project_id", e.ProjectID, false)
}

// identifier checks one identifier member at path: 1 to
// [IdentifierMaxLen] bytes of text and, where virtual (platform and cloud),
// neither "meta" nor "partner".
func (ps *problemList) identifier(path, value string, virtual bool) {
	switch n := len(value); {
	case n == 0:
		ps.add(path, RuleRequired, "is required (1 to 512 bytes)")
	case n > IdentifierMaxLen:
		ps.add(path, RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", IdentifierMaxLen, n))
	case virtual && (value == "meta" || value == "partner"):
		ps.add(path, RuleReserved, fmt.Sprintf("must not be %q: meta and partner name the virtual projects, which own no resources", value))
	default:
		ps.addText(path, value)
	}
}

// source checks source: absent, or one of [Sources]; an over-long value is
// not quoted back.
func (ps *problemList) source(s Source) {
	if s == "" || s.Valid() {
		return
	}
	msg := "must be collector or reconciliation, or left out"
	if len(s) <= IdentifierMaxLen {
		msg = fmt.Sprintf("%q %s", string(s), msg)
	}
	ps.add("/source", RuleEnum, msg)
}

// state checks payload.state: at most [StateMaxLen] bytes of text, and
// required on every event whose category cat is not a delete.
func (ps *problemList) state(st State, cat Category) {
	switch {
	case len(st.String()) > StateMaxLen:
		ps.add("/payload/state", RuleMaxLength, fmt.Sprintf("must be at most %d bytes, has %d", StateMaxLen, len(st.String())))
	case st.Missing() && cat != CategoryDelete:
		ps.add("/payload/state", RuleRequired, "is required on every event except a delete")
	default:
		ps.addText("/payload/state", st.String())
	}
}

// size checks payload.size: an object when present (null counts as
// absent), and required when the category cat is a create.
func (ps *problemList) size(size jsontext.Value, cat Category) {
	switch k := rawKind(size); {
	case k != '{' && k != 0 && k != 'n':
		ps.add("/payload/size", RuleType, "must be an object, not "+jsonKind(jsontext.Kind(k)))
	case k != '{' && cat == CategoryCreate:
		ps.add("/payload/size", RuleRequired, "is required on a create (the full size object)")
	}
}

// provider checks payload.provider: an object when present (null counts
// as absent).
func (ps *problemList) provider(provider jsontext.Value) {
	if k := rawKind(provider); k != '{' && k != 0 && k != 'n' {
		ps.add("/payload/provider", RuleType, "must be an object, not "+jsonKind(jsontext.Kind(k)))
	}
}

// rawMembers checks the raw members of a Go-built payload, which can hold
// what Decode would never produce: each must be what the encoder and the
// stores can keep, and the unknown members an object naming no known one.
func (ps *problemList) rawMembers(p *PayloadEnvelope) {
	for _, f := range [...]struct {
		path string
		raw  jsontext.Value
	}{{"/payload/size", p.Size}, {"/payload/provider", p.Provider}, {"/payload", p.Unknown}} {
		if rule, msg := rawProblem(f.raw); rule != "" {
			ps.add(f.path, rule, msg)
		}
	}
	ps.unknownMembers(p.Unknown)
}

// unknownMembers checks the payload's unknown members: an object when
// present, none of them named like a known member.
func (ps *problemList) unknownMembers(unknown jsontext.Value) {
	switch k := rawKind(unknown); k {
	case 0:
	case '{':
		for _, name := range [...]string{"state", "size", "provider"} {
			if unknownHas(unknown, name) {
				ps.add("/payload/"+name, RuleDuplicateMember, "is given more than once (also among the unknown members)")
			}
		}
	default:
		ps.add("/payload", RuleType, "unknown members must form an object, not "+jsonKind(jsontext.Kind(k)))
	}
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
