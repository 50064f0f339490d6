package event

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

var errStateKind = errors.New("must be a string or null")

var decodeOptions = json.JoinOptions(
	json.RejectUnknownMembers(true),
	// The v2 defaults already give the rest of the strictness: names match
	// case-sensitively, a duplicate name and invalid UTF-8 are errors.
)

var nulEscape = []byte(`\u0000`)

// MaxDepth is how deep an item may nest objects and arrays, the item's own
// object counting as level 1: [AnswerDepth] levels below the limit of the
// JSON decoders (10,000, github.com/go-json-experiment/json's and
// encoding/json's alike), so that an answer embedding a stored item, or a
// correlated event's metadata, is still one every client can decode.
// [Decode] refuses a deeper item with [RuleDepth], naming the member where
// the limit is crossed; inside a batch only that item is refused
// (docs/decisions.md, An item that breaks a parser limit).
const MaxDepth = 10000 - AnswerDepth

// AnswerDepth is how many levels an HTTP answer may add above a stored
// value it embeds (a lifecycle page: the answer, items, the event,
// payload; a correlated feed: the answer, items, the item, event,
// metadata).
const AnswerDepth = 16

// Depth is how deep b nests objects and arrays (0 for a scalar), reading
// b as JSON text: brackets inside strings do not count. b need not be
// valid JSON; the answer then counts its brackets as they come.
func Depth(b []byte) int {
	depth, most := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			// Skip to the closing quote: the next quote not escaped by an
			// odd run of backslashes.
			for {
				j := bytes.IndexByte(b[i+1:], '"')
				if j < 0 {
					return most
				}
				i += 1 + j
				n := 0
				for k := i - 1; b[k] == '\\'; k-- {
					n++
				}
				if n%2 == 0 {
					break
				}
			}
		case '{', '[':
			depth++
			most = max(most, depth)
		case '}', ']':
			depth--
		}
	}
	return most
}

// DeepPointer is the JSON Pointer of the first value of b nested deeper
// than limit, cut to its first four reference tokens (as [RuleDepth]
// problems name it), and whether there is one.
func DeepPointer(b []byte, limit int) (string, bool) {
	if len(b) <= limit || Depth(b) <= limit {
		return "", false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		if _, err := dec.ReadToken(); err != nil {
			return "", true
		}
		if dec.StackDepth() > limit {
			return depthPointer(string(dec.StackPointer())), true
		}
	}
}

// Decode reads one canonical event from b, strictly (canonical-event.md,
// Members; docs/decisions.md, Canonical events):
//
//   - b must hold one JSON object and nothing else;
//   - member names are case-sensitive, and an unknown top-level member is
//     refused (the payload keeps unknown members instead);
//   - a member given twice, at any depth, invalid UTF-8, and a NUL character
//     (raw or \u0000) in any name or string are refused;
//   - timestamp must be an RFC 3339 date-time with Z or an offset, read by
//     [ParseTime], the grammar of every route ("2012-05-08
//     20:23:48.028195" is refused); it is normalized to UTC and truncated to
//     microseconds, here and only here, so every store compares the same
//     instant; "timestamp": null reads as no timestamp, and the one instant
//     0001-01-01T00:00:00Z (the zero time.Time, which means no timestamp
//     in an [Event]) is refused with [RuleMinimum] rather than read as
//     absent;
//   - payload members keep their exact JSON value (no float64 rounding):
//     size and provider keep their bytes as sent; the members the envelope
//     does not name are gathered in [PayloadEnvelope.Unknown] as one object,
//     each with its value's bytes as sent.
//
// A timestamp whose UTC form falls outside the years 0000 to 9999 (possible
// through an offset) is refused by [ParseTime], since RFC 3339 cannot write it. An absent
// payload, or "payload": null, decodes as an empty envelope, and "source":
// null as a source left out; [Validate] judges what follows from that.
//
// Decode does not apply the rules of [Validate]; call it next. On failure
// the error is a [*ValidationError] with exactly one [Problem]: its Member is the JSON
// Pointer of the member ("" for the item as a whole, or the object holding a
// member name that has a NUL or invalid UTF-8), its Rule one of [RuleType],
// [RuleSyntax], [RuleDepth], [RuleAdditionalProperties], [RuleDuplicateMember], [RuleUTF8], [RuleNUL],
// [RuleFormat] and [RuleMinimum]; errors.Is(err, ErrInvalid) holds. The returned Event is the
// zero Event then. Decode keeps no reference to b and is safe for concurrent
// use.
func Decode(b []byte) (Event, error) {
	switch i := firstIndex(b); {
	case i < 0:
		return Event{}, single("", RuleType, "the item must be a JSON object, not nothing")
	case b[i] == 0:
		return Event{}, single("", RuleNUL, msgNUL)
	case b[i] != '{':
		return Event{}, single("", RuleType, "the item must be a JSON object, not "+kindName(b[i]))
	}
	if bytes.Contains(b, nulEscape) {
		if p, ok := findNUL(b); ok {
			return Event{}, single(p, RuleNUL, msgNUL)
		}
	}
	if p, ok := DeepPointer(b, MaxDepth); ok {
		return Event{}, single(p, RuleDepth, depthMessage)
	}
	var w wireEvent
	if !scanEvent(b, &w) {
		var err error
		if w, err = unmarshalWire(b); err != nil {
			return Event{}, decodeProblem(b, err)
		}
	}
	if w.Timestamp.set {
		// ParseTime refused a UTC form outside the years 0000 to 9999
		// already (9999-12-31T23:59:59-01:00 is in year 10000 in UTC; such
		// an event could not be encoded again).
		w.Timestamp.t = Normalize(w.Timestamp.t)
		if w.Timestamp.t.IsZero() {
			// The zero time.Time is how an Event says "no timestamp", so
			// this one instant cannot be stored as sent; say so rather
			// than call a timestamp that was given "required".
			return Event{}, single("/timestamp", RuleMinimum, "must be after 0001-01-01T00:00:00Z: that instant (to the microsecond) is the zero time, which tally reads as no timestamp")
		}
	}
	if w.Payload.Unknown != nil {
		// The json package gathers unknown members with their values as
		// sent but their names re-quoted; keep the names as sent too.
		raw, err := payloadMember(b)
		if err == nil {
			w.Payload.Unknown, err = rawUnknown(raw)
		}
		if err != nil {
			return Event{}, single("/payload", RuleSyntax, "invalid JSON: "+err.Error())
		}
	}
	return w.event(), nil
}

// unmarshalWire is the full decoder of [Decode], for what scanEvent does
// not take. Its own variable escapes to the json package, so that Decode's
// does not.
func unmarshalWire(b []byte) (wireEvent, error) {
	var w wireEvent
	err := json.Unmarshal(b, &w, decodeOptions)
	return w, err
}

const msgNUL = "must not contain a NUL character (raw or \\u0000)"

var depthMessage = fmt.Sprintf("must not nest objects and arrays more than %d levels deep", MaxDepth)

// firstIndex returns the index of the first non-space byte of b, or -1.
func firstIndex(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return i
	}
	return -1
}

// firstByte returns the first non-space byte of b, or 0.
func firstByte(b []byte) byte {
	if i := firstIndex(b); i >= 0 {
		return b[i]
	}
	return 0
}

func kindName(k byte) string {
	switch k {
	case 0:
		return "nothing"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	default:
		if k == '-' || (k >= '0' && k <= '9') {
			return "a number"
		}
		return "invalid JSON"
	}
}

// findNUL walks b token by token and returns the JSON Pointer of the first
// name or string holding a NUL character. It is called only when b contains
// the escape at all, so the common case pays one bytes.Contains.
func findNUL(b []byte) (string, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false // a syntax error is reported by the decoder proper
		}
		if tok.Kind() == '"' && strings.IndexByte(tok.String(), 0) >= 0 {
			return string(dec.StackPointer()), true
		}
	}
}

// decodeProblem turns a json v2 error on b into one Problem naming the
// member.
func decodeProblem(b []byte, err error) error {
	var serr *json.SemanticError
	var synErr *jsontext.SyntacticError
	switch {
	case errors.As(err, &synErr):
		ptr := string(synErr.JSONPointer)
		switch {
		case errors.Is(synErr.Err, jsontext.ErrDuplicateName):
			return single(ptr, RuleDuplicateMember, "is given more than once")
		case synErr.ByteOffset >= 0 && synErr.ByteOffset < int64(len(b)) && b[synErr.ByteOffset] == 0:
			return single(ptr, RuleNUL, msgNUL)
		case isUTF8Error(synErr):
			return single(ptr, RuleUTF8, "must be valid UTF-8")
		case synErr.Err != nil && synErr.Err.Error() == "exceeded max depth":
			return single(depthPointer(ptr), RuleDepth, depthMessage)
		case errors.Is(synErr.Err, io.ErrUnexpectedEOF):
			return single(ptr, RuleSyntax, "invalid JSON: unexpected end of input")
		default:
			return single(ptr, RuleSyntax, "invalid JSON: "+synErr.Err.Error())
		}
	case errors.As(err, &serr):
		ptr := string(serr.JSONPointer)
		switch {
		case errors.Is(serr.Err, json.ErrUnknownName):
			return single(ptr, RuleAdditionalProperties, "is not a member of the canonical event (names are case-sensitive; extension data belongs in payload)")
		case ptr == "/timestamp":
			return single(ptr, RuleFormat, TimeMessage(serr.Err))
		case ptr == "/payload/state":
			return single(ptr, RuleType, errStateKind.Error())
		case ptr == "/payload":
			return single(ptr, RuleType, "must be a JSON object")
		default:
			want := "a string"
			if serr.GoType != nil && serr.GoType.Kind().String() == "struct" {
				want = "an object"
			}
			return single(ptr, RuleType, fmt.Sprintf("must be %s, not %s", want, jsonKind(serr.JSONKind)))
		}
	}
	return single("", RuleSyntax, "invalid JSON: "+err.Error())
}

// depthPointer names where the depth limit was crossed by its first four
// reference tokens ("/payload/provider/a/a"): the whole pointer of a value
// 10,000 levels deep would fill the reason.
func depthPointer(p string) string {
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			if n == 4 {
				return p[:i]
			}
			n++
		}
	}
	return p
}

func isUTF8Error(e *jsontext.SyntacticError) bool {
	return e.Err != nil && (strings.Contains(e.Err.Error(), "UTF-8") || strings.Contains(e.Err.Error(), "surrogate"))
}

func jsonKind(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "this value"
}
