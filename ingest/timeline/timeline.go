// Package timeline folds one resource's lifecycle events into its lives and
// the half-open intervals [From, To) over which its state, size and project
// did not change: what the usage pass (package
// github.com/tallyhq/tally/ingest/usage) meters and what GET
// /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle shows
// (docs/usage.md). It is pure: no I/O, no clock.
//
// # Rules
//
// The history is folded in the projection's order ([projection.Compare]: by
// timestamp, then create < update < delete, then event_id), so the result
// never depends on the order in which events arrived, not even for events
// of equal timestamp (Tally breaks such ties by received_at, which does
// depend on it).
//
//   - A create opens a life and an interval, starting from nothing (a
//     create carries state and size; one that lacks them leaves them
//     empty); a create during a life changes
//     the interval like an update.
//   - An update during a life changes state (when it carries one), size
//     (when it carries an object) and project (always, from the envelope's
//     project_id); a new interval starts only when one of the three differs
//     from the open interval's ([SizeEqual] compares sizes).
//   - A delete closes the open interval and the life, and opens none.
//   - An event after a delete with no create between adds nothing and warns
//     [CodeEventAfterDelete].
//   - A history whose first event is not a create is folded from its first
//     event (a life opens there) with the warning
//     [CodeHistoryStartsWithoutCreate]; when that event is a delete, no life
//     opens.
//   - Zero-length intervals (two changes at one instant) are dropped, and
//     the intervals around them merge when they are equal.
package timeline

import (
	"bytes"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest/projection"
)

// Code names the kind of a [Warning]; the closed set is [Codes].
type Code string

// The warning codes.
const (
	// CodeHistoryStartsWithoutCreate: the first event is not a create, so
	// the resource's real start is unknown; the fold starts at that event.
	CodeHistoryStartsWithoutCreate Code = "history_starts_without_create"
	// CodeEventAfterDelete: an event came after a delete with no create
	// between; it added nothing.
	CodeEventAfterDelete Code = "event_after_delete"
)

// Codes lists every [Code].
func Codes() []Code { return []Code{CodeHistoryStartsWithoutCreate, CodeEventAfterDelete} }

// Warning is one thing in a history that the fold could not take at face
// value.
type Warning struct {
	Code Code `json:"code"`
	// EventID is the event the warning is about.
	EventID string `json:"event_id"`
	// Message says what happened, for a person.
	Message string `json:"message"`
}

// Interval is a half-open span [From, To) of one life over which state,
// size and project did not change.
type Interval struct {
	From time.Time `json:"from"`
	// To is nil while the interval is open (the resource lives on in it).
	To    *time.Time `json:"to"`
	State string     `json:"state"`
	// Size is the size as exact JSON (an object), as the event that set it
	// sent it; nil (encoded null) when no event of the life carried one.
	Size      jsontext.Value `json:"size"`
	ProjectID string         `json:"project_id"`
}

// Life is one span from a create (or the first event of a history that
// starts without one) to the delete that ends it.
type Life struct {
	From time.Time `json:"from"`
	// To is nil while the resource is alive.
	To *time.Time `json:"to"`
	// Created is false for a life folded from a first event that is not a
	// create.
	Created bool `json:"created"`
}

// Timeline is the fold of one resource's history.
type Timeline struct {
	// Platform is the platform of the last event folded; "" for an empty
	// history.
	Platform string
	// Lives and Intervals are in time order; never nil.
	Lives     []Life
	Intervals []Interval
	// Warnings are in fold order; never nil.
	Warnings []Warning
}

// Build folds history, which must concern one resource, in any order (see
// the package documentation). An empty history gives an empty Timeline.
// Build does not change history.
func Build(history []event.Event) Timeline { return BuildFrom(nil, time.Time{}, history) }

// BuildFrom is [Build] of a history whose events before at were folded
// into start and dropped (a checkpoint retention wrote: docs/operations.md,
// Retention); history holds the events from at on. A nil start is [Build].
// When start is alive (no DeletedAt), a life (Created false: its create
// is gone) and an interval with start's state, size and project open at at,
// with no warning; when it is deleted, nothing is open and a later event
// other than a create warns [CodeEventAfterDelete]. Nothing before at is
// known.
func BuildFrom(start *projection.Resource, at time.Time, history []event.Event) Timeline {
	var b Builder
	return b.BuildFrom(start, at, history)
}

// A Builder folds histories one after another, as [BuildFrom] does,
// remembering the canonical form of every size it compared (at most
// builderSizes of them), so that the sizes many resources share are
// canonicalised once: a usage query folds every selected resource with
// one. The zero value is ready; a Builder is not safe for concurrent use.
type Builder struct {
	canon map[string]string
}

// builderSizes bounds a Builder's memory of sizes; past it, it forgets
// them all and starts again.
const builderSizes = 4096

// BuildFrom is [BuildFrom] with b's memory of sizes. A history already in
// [projection.Compare] order (as the stores give one) is not copied.
func (bd *Builder) BuildFrom(start *projection.Resource, at time.Time, history []event.Event) Timeline {
	sorted := history
	if !isSorted(history) {
		sorted = slices.Clone(history)
		slices.SortFunc(sorted, func(a, b event.Event) int { return projection.Compare(&a, &b) })
	}
	if len(bd.canon) > builderSizes {
		clear(bd.canon)
	}
	// Every event closes at most one interval and ends at most one life:
	// room for them all at once, and for as many end instants.
	n := len(sorted) + 1
	b := builder{tl: Timeline{Lives: []Life{}, Intervals: make([]Interval, 0, n), Warnings: []Warning{}},
		canon: bd.canon, ends: make([]time.Time, 0, 2*n)}
	if start != nil {
		b.tl.Platform = start.Platform
		if start.DeletedAt == nil {
			b.alive = true
			b.tl.Lives = append(b.tl.Lives, Life{From: at})
			b.cur = Interval{From: at, State: start.State, Size: start.Size, ProjectID: start.ProjectID}
		}
	}
	for i := range sorted {
		b.apply(start == nil && i == 0, &sorted[i])
	}
	if b.alive {
		b.tl.Intervals = append(b.tl.Intervals, b.cur)
	}
	bd.canon = b.canon
	return b.tl
}

// isSorted reports whether history is in [projection.Compare] order
// (slices.IsSortedFunc without copying each event into the comparison).
func isSorted(history []event.Event) bool {
	for i := 1; i < len(history); i++ {
		if projection.Compare(&history[i], &history[i-1]) < 0 {
			return false
		}
	}
	return true
}

type builder struct {
	tl    Timeline
	alive bool
	// cur is the open interval while alive.
	cur Interval
	// canon memoizes [Canonical] by the raw size text, so that a history
	// canonicalizes each distinct size once.
	canon map[string]string
	// ends holds the instants the To of the intervals and lives point to:
	// one allocation for the history instead of one each.
	ends []time.Time
}

// end returns a pointer to a copy of t that stays valid: ends is never
// appended to past its capacity (a full one is replaced, not grown).
func (b *builder) end(t time.Time) *time.Time {
	if len(b.ends) == cap(b.ends) {
		b.ends = make([]time.Time, 0, 8)
	}
	b.ends = append(b.ends, t)
	return &b.ends[len(b.ends)-1]
}

// sizeEqual is [SizeEqual] with the builder's memo.
func (b *builder) sizeEqual(x, y jsontext.Value) bool {
	if bytes.Equal(x, y) {
		return true
	}
	return b.canonical(x) == b.canonical(y)
}

func (b *builder) canonical(v jsontext.Value) string {
	if c, ok := b.canon[string(v)]; ok {
		return c
	}
	c, err := Canonical(v)
	s := string(c)
	if err != nil {
		s = "\x00" + string(v) // equal only to the identical bytes
	}
	if b.canon == nil {
		b.canon = make(map[string]string)
	}
	b.canon[string(v)] = s
	return s
}

func (b *builder) warn(c Code, e *event.Event, msg string) {
	b.tl.Warnings = append(b.tl.Warnings, Warning{Code: c, EventID: e.EventID, Message: msg})
}

func (b *builder) apply(first bool, e *event.Event) {
	b.tl.Platform = e.Platform
	cat := event.Categorize(e.EventType)
	if first && cat != event.CategoryCreate {
		b.warn(CodeHistoryStartsWithoutCreate, e, "the history starts with "+string(cat)+" event "+e.EventType+"; it is folded from there")
		if cat == event.CategoryUpdate {
			b.open(e, false)
			return
		}
	}
	switch {
	case cat == event.CategoryCreate && !b.alive:
		b.open(e, true)
	case !b.alive:
		if !first {
			b.warn(CodeEventAfterDelete, e, string(cat)+" event "+e.EventType+" after the resource was deleted; it adds nothing")
		}
	case cat == event.CategoryDelete:
		b.close(e.Timestamp)
		b.tl.Lives[len(b.tl.Lives)-1].To = b.end(e.Timestamp)
		b.alive = false
	default:
		next := b.cur
		next.ProjectID = e.ProjectID
		applyPayload(&next, e)
		if next.State == b.cur.State && next.ProjectID == b.cur.ProjectID && b.sizeEqual(next.Size, b.cur.Size) {
			return
		}
		b.close(e.Timestamp)
		next.From = e.Timestamp
		b.reopen(next)
	}
}

func applyPayload(iv *Interval, e *event.Event) {
	if !e.Payload.State.Missing() {
		iv.State = e.Payload.State.String()
	}
	if e.Payload.Size.Kind() == '{' {
		iv.Size = e.Payload.Size
	}
}

// open starts a life and its first interval at e.
func (b *builder) open(e *event.Event, created bool) {
	b.alive = true
	b.tl.Lives = append(b.tl.Lives, Life{From: e.Timestamp, Created: created})
	iv := Interval{From: e.Timestamp, ProjectID: e.ProjectID}
	applyPayload(&iv, e)
	b.cur = iv
}

// close ends the open interval at t, keeping it unless it is zero-length.
func (b *builder) close(t time.Time) {
	if !t.After(b.cur.From) {
		return
	}
	iv := b.cur
	iv.To = b.end(t)
	b.tl.Intervals = append(b.tl.Intervals, iv)
}

// reopen makes next the open interval, or, when the last kept interval of
// this life ends where next starts and equals it (a zero-length change
// between them was dropped), continues that one.
func (b *builder) reopen(next Interval) {
	if n := len(b.tl.Intervals); n > 0 {
		last := b.tl.Intervals[n-1]
		if last.To.Equal(next.From) && !last.From.Before(b.tl.Lives[len(b.tl.Lives)-1].From) &&
			last.State == next.State && last.ProjectID == next.ProjectID && b.sizeEqual(last.Size, next.Size) {
			b.tl.Intervals = b.tl.Intervals[:n-1]
			next.From = last.From
		}
	}
	b.cur = next
}

// Clip returns the parts of intervals that lie in [from, to), in order,
// each with To set: an open interval ends at to. Parts of zero length are
// left out. It does not change intervals (Size is shared).
func Clip(intervals []Interval, from, to time.Time) []Interval {
	out := []Interval{}
	for _, iv := range intervals {
		end := to
		if iv.To != nil && iv.To.Before(to) {
			end = *iv.To
		}
		start := iv.From
		if start.Before(from) {
			start = from
		}
		if !end.After(start) {
			continue
		}
		iv.From, iv.To = start, &end
		out = append(out, iv)
	}
	return out
}
