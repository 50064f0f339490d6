// Package page holds what every listing of tally shares: the checks of a
// read's parameters (text filters, limit, cursor), the bounds of the times
// and strings a cursor may hold, the byte budget of one page and the cut of
// the items read into a page with its next cursor. The ingest and
// projection packages and both stores use it; it is internal so that the
// public API keeps one validation error ([*event.ValidationError]) and no
// store-only helper.
package page

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tallyhq/tally/event"
)

// Paging bounds of every listing: a limit of 0 means DefaultLimit, and no
// page holds more than MaxLimit items.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// MaxBytes bounds one page of every listing by the bytes of its items (see
// ingest.MaxPageBytes and docs/http-api.md, Answer bounds).
const MaxBytes = 8 << 20

// ItemOverhead is the allowance per item for member names, times, ids and
// punctuation, in bytes, that every item size adds to its strings.
const ItemOverhead = 256

// Params collects the problems of the parameters of one read or put, so
// that the refusal lists every bad parameter, not the first. A problem's
// Member is "/" + the parameter's name as the HTTP API spells it (/cloud,
// /resource_type, /limit, /cursor): a JSON Pointer into the parameters
// taken as one object. Err returns them as an [*event.ValidationError]
// (matching [event.ErrInvalid]), tally's one validation error.
type Params []event.Problem

// Text refuses a value that is not valid UTF-8 or holds a NUL character: it
// cannot name anything stored (event.Decode refuses both).
func (ps *Params) Text(name, v string) {
	switch {
	case !utf8.ValidString(v):
		*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleUTF8, Message: "must be valid UTF-8"})
	case strings.IndexByte(v, 0) >= 0:
		*ps = append(*ps, event.Problem{Member: "/" + name, Rule: event.RuleNUL, Message: "must not contain a NUL character"})
	}
}

// Limit refuses a limit outside 1..MaxLimit (0 means DefaultLimit) and
// returns the limit to use.
func (ps *Params) Limit(n int) int {
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

// BadCursor refuses a cursor that no listing issued.
func (ps *Params) BadCursor() {
	*ps = append(*ps, event.Problem{Member: "/cursor", Rule: event.RuleFormat, Message: "must be the next_cursor of an earlier page"})
}

// Err returns the problems as an [*event.ValidationError], or nil when
// there is none.
func (ps Params) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return &event.ValidationError{Problems: ps}
}

// CheckText returns an [*event.ValidationError] listing every pair (name,
// value) whose value is not valid UTF-8 or holds a NUL, or nil.
func CheckText(pairs ...string) error {
	var ps Params
	for i := 0; i+1 < len(pairs); i += 2 {
		ps.Text(pairs[i], pairs[i+1])
	}
	return ps.Err()
}

// Bounds of the times a cursor may hold: the years 0000 to 9999 in UTC,
// the times RFC 3339 can write and so every time tally stores and issues
// (event.ParseTime refuses others; received and audit times are the
// clock's), well within what PostgreSQL's timestamptz keeps (4713 BC on).
var (
	minCursorTime = time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorTime = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMicro() - 1
)

// CursorTime is the time a cursor holds as microseconds since the Unix
// epoch, and whether tally could have issued it (the years 0000 to 9999).
// It is the one check of every cursor's time, so that a tampered cursor is
// refused as /cursor on every store instead of reaching PostgreSQL (which
// fails before 4713 BC) or listing differently on each store.
func CursorTime(us int64) (time.Time, bool) {
	if us < minCursorTime || us > maxCursorTime {
		return time.Time{}, false
	}
	return time.UnixMicro(us).UTC(), true
}

// CursorText reports whether every string a cursor holds could name
// something stored: valid UTF-8 without a NUL character (event.Decode
// refuses both; PostgreSQL text cannot hold a NUL).
func CursorText(v ...string) bool {
	for _, s := range v {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}

// ByteBudget tells a store when to stop reading a page (the MaxBytes of a
// store query): add each item's size as it is read; Full reports true once
// at least two items are held and their sizes total more than max, so the
// caller holds one item past the budget, which shows the page has more. A
// max of 0 or less never fills.
type ByteBudget struct {
	max, total, n int
}

// NewByteBudget returns a budget of max bytes.
func NewByteBudget(max int) ByteBudget { return ByteBudget{max: max} }

// Add counts one item of size bytes and reports whether the budget is
// full (see [ByteBudget]).
func (b *ByteBudget) Add(size int) (full bool) {
	b.total += size
	b.n++
	return b.max > 0 && b.n >= 2 && b.total > b.max
}

// Cut returns how many leading items of items fit a page of limit items
// and [MaxBytes] (at least one when items has any).
func Cut[T any](items []T, limit int, size func(T) int) int {
	n, total := 0, 0
	for n < len(items) && n < limit {
		s := size(items[n])
		if n > 0 && total+s > MaxBytes {
			break
		}
		total += s
		n++
	}
	return n
}

// Paginate cuts items, read with limit+1, to one page: the first limit
// items that fit [MaxBytes] (never nil) and, when there were more, the
// cursor after the last.
func Paginate[T any](items []T, limit int, size func(T) int, cursor func(T) string) ([]T, *string) {
	if n := Cut(items, limit, size); n < len(items) {
		c := cursor(items[n-1])
		return items[:n], &c
	}
	if items == nil {
		items = []T{}
	}
	return items, nil
}

// CeilMicro rounds t up to the next microsecond, the precision every stored
// time has, in UTC, so that a window [From, To) finer than a microsecond
// selects the same rows on every store: a row at T is before From = T+400ns
// (From rounds to T+1µs) and before To = T+400ns (To rounds to T+1µs), as
// exact arithmetic says. The zero time stays zero.
func CeilMicro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	u := t.UTC().Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return u
}
