package usage

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/internal/feed"
	"github.com/tallyhq/tally/internal/page"
)

// Window is how an answer buckets time: one bucket or UTC-aligned hours,
// days or months.
type Window string

// The windows.
const (
	WindowNone  Window = "none"
	WindowHour  Window = "hour"
	WindowDay   Window = "day"
	WindowMonth Window = "month"
)

// Windows lists every [Window].
func Windows() []Window { return []Window{WindowNone, WindowHour, WindowDay, WindowMonth} }

// Unit is the unit of time of an answer's quantity.
type Unit string

// The units.
const (
	UnitSecond Unit = "second"
	UnitHour   Unit = "hour"
)

// Units lists every [Unit].
func Units() []Unit { return []Unit{UnitSecond, UnitHour} }

// QuantitySeconds is the default [Query.Quantity]: the time alive.
const QuantitySeconds = "seconds"

// The group_by keys besides size.<member>, and the prefix of a size
// member (in group_by and quantity).
var groupKeys = []string{"cloud", "platform", "project_id", "resource_type", "resource_id", "state"}

const sizePrefix = "size."

// The bounds of a query (docs/usage.md, Bounds).
const (
	// MaxWindows bounds the windows of one answer.
	MaxWindows = 10000
	// MaxHourSpan bounds the span of a query with window=hour.
	MaxHourSpan = 400 * 24 * time.Hour
	// MaxItems bounds the items a query may compute before paging; a query
	// past it is [ErrResultTooLarge].
	MaxItems = 100000
	// MaxGroupBytes bounds the bytes of the group values a query holds
	// while reading (every item's, each counted twice: the item and its
	// key); a query past it is [ErrResultTooLarge].
	MaxGroupBytes = 64 << 20
	// MaxGroupBy bounds the keys of group_by: each key adds a value to
	// every item.
	MaxGroupBy = 16
	// MaxWarnings bounds the warnings of an answer (the first by resource
	// key, then code).
	MaxWarnings = 100
)

// ErrResultTooLarge is returned (wrapped in a *[TooLargeError]) for a query
// that would produce more windows or items than an answer may: 422
// result_too_large.
var ErrResultTooLarge = errors.New("usage: the result would be too large")

// TooLargeError says which bound a query broke. It matches
// [ErrResultTooLarge] with errors.Is.
type TooLargeError struct{ Reason string }

func (e *TooLargeError) Error() string { return ErrResultTooLarge.Error() + ": " + e.Reason }

// Is reports whether target is [ErrResultTooLarge].
func (e *TooLargeError) Is(target error) bool { return target == ErrResultTooLarge }

// Query is one usage question (GET /api/v1/usage; docs/usage.md).
type Query struct {
	// From and To are the window [From, To); both required, To after From.
	From, To time.Time
	// Window is "" (none), none, hour, day or month.
	Window Window
	// GroupBy lists keys of cloud, platform, project_id, resource_type,
	// resource_id, state and size.<member>, each at most once.
	GroupBy []string
	// Quantity is "" (seconds), seconds, or size.<member>: the member's
	// value times the seconds.
	Quantity string
	// Unit is "" (second), second or hour.
	Unit Unit
	// Filters, each an exact match on the interval (cloud and
	// resource_type on the resource, platform on its events); "" matches
	// everything.
	Cloud, Platform, ProjectID, ResourceType, State string
	// AsOf is "" for the feed's head, or a cursor of the lifecycle feed
	// (a position or next_cursor of GET /api/v1/events/feed).
	AsOf string
	// Limit is 1..1000; 0 means 100.
	Limit int
	// Cursor is "" for the first page, else a NextCursor of an earlier
	// page of the same query.
	Cursor string
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of q, or nil. It does not judge the bounds ([ErrResultTooLarge]).
func (q Query) Validate() error {
	var ps page.Params
	q.check(&ps)
	return ps.Err()
}

// plan is a checked query.
type plan struct {
	q      Query
	window Window
	unit   Unit
	member string // the quantity's size member; "" for seconds
	limit  int
	asOf   *feed.Position
	offset int
}

func (q Query) check(ps *page.Params) plan {
	// Bounds in UTC at the microsecond every stored time has (rounded up,
	// as every listing's window): windows align to UTC, and both stores
	// select the same events.
	q.From, q.To = microBound(q.From), microBound(q.To)
	p := plan{q: q, window: q.Window, unit: q.Unit}
	for _, t := range [...]struct{ name, v string }{
		{"cloud", q.Cloud}, {"platform", q.Platform}, {"project_id", q.ProjectID},
		{"resource_type", q.ResourceType}, {"state", q.State},
	} {
		ps.Text(t.name, t.v)
	}
	q.checkSpan(ps)
	if p.window == "" {
		p.window = WindowNone
	}
	switch p.window {
	case WindowNone, WindowHour, WindowDay, WindowMonth:
	default:
		*ps = append(*ps, event.Problem{Member: "/window", Rule: event.RuleEnum, Message: "must be none, hour, day or month"})
	}
	if p.unit == "" {
		p.unit = UnitSecond
	}
	if p.unit != UnitSecond && p.unit != UnitHour {
		*ps = append(*ps, event.Problem{Member: "/unit", Rule: event.RuleEnum, Message: "must be second or hour"})
	}
	switch {
	case q.Quantity == "" || q.Quantity == QuantitySeconds:
	case strings.HasPrefix(q.Quantity, sizePrefix) && validMember(q.Quantity[len(sizePrefix):]):
		p.member = q.Quantity[len(sizePrefix):]
	default:
		*ps = append(*ps, event.Problem{Member: "/quantity", Rule: event.RuleEnum, Message: "must be seconds or size.<member>"})
	}
	checkGroupBy(ps, q.GroupBy)
	if q.AsOf != "" {
		pos, ok := ingest.DecodeFeedCursor(q.AsOf)
		if !ok {
			*ps = append(*ps, badAsOf())
		} else {
			p.asOf = &pos
		}
	}
	p.limit = ps.Limit(q.Limit)
	if q.Cursor != "" {
		c, ok := decodeCursor(q.Cursor)
		switch {
		case !ok || c.fingerprint != q.fingerprint():
			ps.BadCursor()
		case q.AsOf != "" && q.AsOf != c.asOf:
			*ps = append(*ps, event.Problem{Member: "/as_of", Rule: event.RuleConst, Message: "must be the as_of of the page the cursor came from, or absent"})
		default:
			pos, ok := ingest.DecodeFeedCursor(c.asOf)
			if !ok {
				ps.BadCursor()
				break
			}
			p.asOf, p.offset = &pos, c.offset
		}
	}
	return p
}

// microBound is page.CeilMicro(t), or t truncated where rounding up would
// leave the year 9999 (no stored time lies there, and an answer could not
// write it).
func microBound(t time.Time) time.Time {
	u := page.CeilMicro(t)
	if u.Year() > 9999 && t.Year() <= 9999 {
		return t.UTC().Truncate(time.Microsecond)
	}
	return u
}

func badAsOf() event.Problem {
	return event.Problem{Member: "/as_of", Rule: event.RuleFormat, Message: "must be a position or next_cursor of GET /api/v1/events/feed"}
}

// validMember reports whether m can name a size member: not empty, UTF-8
// without NUL, at most 512 bytes.
func validMember(m string) bool {
	return m != "" && len(m) <= 512 && page.CursorText(m)
}

func checkGroupBy(ps *page.Params, keys []string) {
	if len(keys) > MaxGroupBy {
		*ps = append(*ps, event.Problem{Member: "/group_by", Rule: event.RuleMaximum,
			Message: fmt.Sprintf("names %d keys, more than %d", len(keys), MaxGroupBy)})
		return
	}
	seen := map[string]bool{}
	for _, k := range keys {
		ok := strings.HasPrefix(k, sizePrefix) && validMember(k[len(sizePrefix):])
		for _, g := range groupKeys {
			ok = ok || k == g
		}
		switch {
		case !ok:
			*ps = append(*ps, event.Problem{Member: "/group_by", Rule: event.RuleEnum,
				Message: "each key must be one of " + strings.Join(groupKeys, ", ") + " or size.<member>"})
			return
		case seen[k]:
			*ps = append(*ps, event.Problem{Member: "/group_by", Rule: event.RuleDuplicateMember, Message: "names " + strconv.Quote(k) + " twice"})
			return
		}
		seen[k] = true
	}
}

// fingerprint identifies a query's parameters apart from as_of, limit and
// cursor, so that a cursor is refused on another query.
func (q Query) fingerprint() uint32 {
	s := strings.Join([]string{
		strconv.FormatInt(q.From.UnixMicro(), 10), strconv.FormatInt(q.To.UnixMicro(), 10), string(q.Window),
		strings.Join(q.GroupBy, ","), q.Quantity, string(q.Unit), q.Cloud, q.Platform, q.ProjectID, q.ResourceType, q.State,
	}, "\x00")
	return crc32.ChecksumIEEE([]byte(s))
}

type cursor struct {
	offset      int
	asOf        string
	fingerprint uint32
}

func encodeCursor(c cursor) string {
	b, err := json.Marshal([]any{"u1", c.offset, c.asOf, c.fingerprint})
	if err != nil {
		panic(err) // numbers and a string always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, false
	}
	var (
		raw []jsontext.Value
		tag string
		c   cursor
	)
	if json.Unmarshal(b, &raw) != nil || len(raw) != 4 || json.Unmarshal(raw[0], &tag) != nil || tag != "u1" ||
		json.Unmarshal(raw[1], &c.offset) != nil || c.offset < 0 || json.Unmarshal(raw[2], &c.asOf) != nil ||
		json.Unmarshal(raw[3], &c.fingerprint) != nil {
		return cursor{}, false
	}
	return c, true
}

// windows returns the starts of the windows of p plus the end of the last
// (len = windows + 1), clipped to [From, To), or ErrResultTooLarge.
func (p plan) windows() ([]time.Time, error) {
	from, to := p.q.From, p.q.To
	if p.window == WindowNone {
		return []time.Time{from, to}, nil
	}
	if p.window == WindowHour && to.Sub(from) > MaxHourSpan {
		return nil, &TooLargeError{Reason: "window=hour spans at most 400 days"}
	}
	var start time.Time
	var step func(time.Time) time.Time
	switch p.window {
	case WindowHour:
		start, step = from.Truncate(time.Hour), func(t time.Time) time.Time { return t.Add(time.Hour) }
	case WindowDay:
		start = time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
	default:
		start = time.Date(from.Year(), from.Month(), 1, 0, 0, 0, 0, time.UTC)
		step = func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }
	}
	if n := estimate(p.window, start, to); n > MaxWindows {
		return nil, &TooLargeError{Reason: fmt.Sprintf("the query has %d windows, more than %d", n, MaxWindows)}
	}
	out := []time.Time{from}
	for t := step(start); t.Before(to); t = step(t) {
		out = append(out, t)
	}
	return append(out, to), nil
}

// estimate counts the windows from start (aligned) to to without listing
// them: the aligned steps that begin before to. A span past what a
// time.Duration holds (292 years) saturates, far above MaxWindows.
func estimate(w Window, start, to time.Time) int64 {
	step := time.Hour
	switch w {
	case WindowDay:
		step = 24 * time.Hour
	case WindowMonth:
		n := int64(to.Year()-start.Year())*12 + int64(to.Month()-start.Month())
		if to.After(time.Date(to.Year(), to.Month(), 1, 0, 0, 0, 0, time.UTC)) {
			n++
		}
		return n
	}
	d := to.Sub(start)
	n := int64(d / step)
	if d%step != 0 {
		n++
	}
	return n
}
