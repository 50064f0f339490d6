package ingest

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tallyhq/tally/event"
)

// params collects the problems of the parameters of one read or put, so
// that the refusal lists every bad parameter, not the first. A problem's
// Member is "/" + the parameter's name as the HTTP API spells it (/cloud,
// /resource_type, /limit, /cursor): a JSON Pointer into the parameters
// taken as one object. err returns them as an [*event.ValidationError]
// (matching [event.ErrInvalid]), tally's one validation error.
type params []event.Problem

// text refuses a value that is not valid UTF-8 or holds a NUL character: it
// cannot name anything stored (event.Decode refuses both).
func (ps *params) text(name, v string) {
	switch {
	case !utf8.ValidString(v):
		*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleUTF8, Message: "must be valid UTF-8"})
	case strings.IndexByte(v, 0) >= 0:
		*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleNUL, Message: "must not contain a NUL character"})
	}
}

// limit refuses a limit outside 1..MaxLimit (0 means DefaultLimit) and
// returns the limit to use.
func (ps *params) limit(n int) int {
	msg := fmt.Sprintf("must be an integer from 1 to %d", MaxLimit)
	switch {
	case n == 0:
		return DefaultLimit
	case n < 0:
		*ps = append(*ps, event.Problem{Member: "/limit", Rule: event.RuleMinimum, Message: msg})
	case n > MaxLimit:
		*ps = append(*ps, event.Problem{Member: "/limit", Rule: event.RuleMaximum, Message: msg})
	}
	return n
}

// badCursor refuses a cursor that no listing issued.
func (ps *params) badCursor() {
	*ps = append(*ps, event.Problem{Member: "/cursor", Rule: event.RuleFormat, Message: "must be the next_cursor of an earlier page"})
}

func (ps params) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &event.ValidationError{Problems: ps}
}

// checkText returns an [*event.ValidationError] listing every pair (name,
// value) whose value is not valid UTF-8 or holds a NUL, or nil.
func checkText(pairs ...string) error {
	var ps params
	for i := 0; i+1 < len(pairs); i += 2 {
		ps.text(pairs[i], pairs[i+1])
	}
	return ps.err()
}
