package ingest

import (
	"fmt"
	"strings"
	"time"
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

// Bounds of the times a cursor may hold: the years 0000 to 9999 in UTC,
// the times RFC 3339 can write and so every time tally stores and issues
// (event.ParseTime refuses others; received and audit times are the
// clock's), well within what PostgreSQL's timestamptz keeps (4713 BC on).
var (
	minCursorTime = time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorTime = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro() - 1
)

// cursorTime is the time a cursor holds as microseconds since the Unix
// epoch, and whether tally could have issued it (see minCursorTime). It is
// the one check of every cursor's time, so that a tampered cursor is
// refused as /cursor on every store instead of reaching PostgreSQL (which
// fails before 4713 BC) or listing differently on each store.
func cursorTime(us int64) (time.Time, bool) {
	if us < minCursorTime || us > maxCursorTime {
		return time.Time{}, false
	}
	return time.UnixMicro(us).UTC(), true
}

// cursorText reports whether every string a cursor holds could name
// something stored: valid UTF-8 without a NUL character (event.Decode
// refuses both; PostgreSQL text cannot hold a NUL).
func cursorText(v ...string) bool {
	for _, s := range v {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}
