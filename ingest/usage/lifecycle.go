package usage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/ingest"
	"github.com/tallyhq/tally/ingest/projection"
	"github.com/tallyhq/tally/ingest/timeline"
	"github.com/tallyhq/tally/internal/page"
	"github.com/tallyhq/tally/store"
)

// Lifecycle is one resource's timeline in the shape of Tally's lifecycle
// read (GET /api/v1/resources/{cloud}/{resource_type}/{resource_id}/lifecycle):
// Tally's Lifecycle{resource, events, intervals, warnings}.
type Lifecycle struct {
	// Resource is the resource as its whole history makes it
	// ([projection.Fold]): Tally's projection row.
	Resource projection.Resource `json:"resource"`
	// Events are the stored events, each with its received_at (Tally's
	// StoredEvent), in fold order ([projection.Compare]).
	Events []ingest.StoredEvent `json:"events"`
	// Intervals are the timeline's ([timeline.Build]); the last is open
	// (to null) while the resource is alive.
	Intervals []timeline.Interval `json:"intervals"`
	// Warnings are the timeline's warning codes, in fold order.
	Warnings []timeline.Code `json:"warnings"`
}

// Lifecycle returns the timeline of one resource from its stored events.
// It returns an [*event.ValidationError] for a key that is not valid UTF-8
// or holds a NUL, an error matching store.ErrNotFound when no event of the
// resource is stored, [ingest.ErrHistoryTooLong] past [ingest.MaxHistory]
// events or [ingest.MaxPageBytes] of them (the read stops there), or the
// store's error wrapped.
func (s *Service) Lifecycle(ctx context.Context, k projection.Key) (Lifecycle, error) {
	if err := page.CheckText("cloud", k.Cloud, "resource_type", k.ResourceType, "resource_id", k.ResourceID); err != nil {
		return Lifecycle{}, err
	}
	items, err := s.store.Events(ctx, ingest.EventQuery{
		Cloud: k.Cloud, ResourceType: k.ResourceType, ResourceID: k.ResourceID, Limit: ingest.MaxHistory + 1, MaxBytes: ingest.MaxPageBytes,
	})
	if err != nil {
		return Lifecycle{}, fmt.Errorf("usage: read the resource's history: %w", err)
	}
	if n := page.Cut(items, ingest.MaxHistory+1, ingest.StoredEventBytes); n > ingest.MaxHistory || n < len(items) {
		return Lifecycle{}, ingest.ErrHistoryTooLong
	}
	// Read after the events, as a retention run writes a checkpoint before
	// it drops the events it folds: the events before it, if still read,
	// are left out.
	start, at, err := s.store.Checkpoint(ctx, k)
	if err != nil {
		return Lifecycle{}, fmt.Errorf("usage: read the resource's checkpoint: %w", err)
	}
	if start != nil {
		items = slices.DeleteFunc(items, func(e ingest.StoredEvent) bool { return e.Event.Timestamp.Before(at) })
	}
	if len(items) == 0 && start == nil {
		return Lifecycle{}, fmt.Errorf("usage: lifecycle of %s/%s/%s: %w", k.Cloud, k.ResourceType, k.ResourceID, store.ErrNotFound)
	}
	slices.SortFunc(items, func(a, b ingest.StoredEvent) int { return projection.Compare(&a.Event, &b.Event) })
	h := History{Key: k, Start: start, StartAt: at, Events: make([]event.Event, len(items))}
	for i := range items {
		h.Events[i] = items[i].Event
	}
	var row projection.Resource // zero: no checkpoint, FoldFrom is Fold
	if start != nil {
		row = *start
	}
	tl := h.Timeline()
	out := Lifecycle{Resource: projection.FoldFrom(row, h.Events), Events: items, Intervals: tl.Intervals, Warnings: []timeline.Code{}}
	for _, w := range tl.Warnings {
		out.Warnings = append(out.Warnings, w.Code)
	}
	return out, nil
}

// SummaryQuery selects one project's activity over [From, To) (GET
// /api/v1/projects/{cloud}/{project_id}/summary).
type SummaryQuery struct {
	Cloud, ProjectID string
	// From and To are required, To after From.
	From, To time.Time
}

// ProjectSummary is one project's activity by resource type, in the shape
// of Tally's per-project summary.
type ProjectSummary struct {
	Project struct {
		Cloud     string `json:"cloud"`
		ProjectID string `json:"project_id"`
	} `json:"project"`
	// ResourceTypes are ordered by resource_type; never nil.
	ResourceTypes []ProjectActivity `json:"resource_types"`
}

// ProjectActivity is one resource type's row of a [ProjectSummary].
type ProjectActivity struct {
	ResourceType string `json:"resource_type"`
	// Created counts the lives begun by a create in [from, to) while in
	// the project; Deleted the lives a delete in [from, to) ended while in
	// it.
	Created int `json:"created"`
	Deleted int `json:"deleted"`
	// TotalMinutes is the time the type's resources were alive in the
	// project within [from, to), summed exactly and truncated to whole
	// minutes once for the row.
	TotalMinutes int64 `json:"total_minutes"`
	// ActiveNow counts the resources alive in the project as of the feed's
	// head.
	ActiveNow int `json:"active_now"`
}

// Summary returns the activity of one project over [q.From, q.To) as of
// the feed's head. It returns an [*event.ValidationError] listing every
// bad parameter, or the store's error wrapped.
func (s *Service) Summary(ctx context.Context, q SummaryQuery) (ProjectSummary, error) {
	var ps page.Params
	ps.Text("cloud", q.Cloud)
	ps.Text("project_id", q.ProjectID)
	q.From, q.To = microBound(q.From), microBound(q.To)
	Query{From: q.From, To: q.To}.checkSpan(&ps)
	if err := ps.Err(); err != nil {
		return ProjectSummary{}, err
	}
	snap, err := s.snapshot(ctx, nil)
	if err != nil {
		return ProjectSummary{}, err
	}
	end := q.To
	if snap.At.Before(end) {
		end = snap.At
	}
	rows := map[string]*ProjectActivity{}
	// Each row's time as whole minutes and the microseconds left over, so
	// that no number of resources wraps an int64.
	type total struct{ minutes, micros int64 }
	totals := map[string]*total{}
	hq := HistoryQuery{Cloud: q.Cloud, ProjectID: q.ProjectID, AsOf: snap.Position}
	err = s.store.Histories(ctx, hq, func(h History) error {
		row := rows[h.Key.ResourceType]
		if row == nil {
			row = &ProjectActivity{ResourceType: h.Key.ResourceType}
		}
		us, touched := activity(row, h.Timeline(), q, end)
		if touched {
			rows[h.Key.ResourceType] = row
			tt := totals[h.Key.ResourceType]
			if tt == nil {
				tt = &total{}
				totals[h.Key.ResourceType] = tt
			}
			tt.micros += us
			tt.minutes += tt.micros / microsPerMinute
			tt.micros %= microsPerMinute
		}
		return nil
	})
	if err != nil {
		return ProjectSummary{}, fmt.Errorf("usage: read the project's histories: %w", err)
	}
	out := ProjectSummary{ResourceTypes: []ProjectActivity{}}
	out.Project.Cloud, out.Project.ProjectID = q.Cloud, q.ProjectID
	for rt, row := range rows {
		row.TotalMinutes = totals[rt].minutes
		out.ResourceTypes = append(out.ResourceTypes, *row)
	}
	slices.SortFunc(out.ResourceTypes, func(a, b ProjectActivity) int { return strings.Compare(a.ResourceType, b.ResourceType) })
	return out, nil
}

const microsPerMinute = int64(time.Minute / time.Microsecond)

// activity adds one resource's timeline to row: its lives begun and ended
// in the window while in the project, whether it is alive in it now, and
// returns its microseconds in the project within [q.From, end) and
// whether it had any interval in the project.
func activity(row *ProjectActivity, tl timeline.Timeline, q SummaryQuery, end time.Time) (int64, bool) {
	in := func(t time.Time) bool { return !t.Before(q.From) && t.Before(q.To) }
	touched := false
	for _, iv := range tl.Intervals {
		touched = touched || iv.ProjectID == q.ProjectID
	}
	if !touched {
		return 0, false
	}
	for _, l := range tl.Lives {
		var first, last *timeline.Interval
		for i := range tl.Intervals {
			iv := &tl.Intervals[i]
			if iv.From.Before(l.From) || l.To != nil && !iv.From.Before(*l.To) {
				continue
			}
			if first == nil {
				first = iv
			}
			last = iv
		}
		if first == nil {
			continue
		}
		if l.Created && in(l.From) && first.ProjectID == q.ProjectID {
			row.Created++
		}
		if l.To != nil && in(*l.To) && last.ProjectID == q.ProjectID {
			row.Deleted++
		}
		if l.To == nil && last.ProjectID == q.ProjectID && last.To == nil {
			row.ActiveNow++
		}
	}
	var us int64
	if end.After(q.From) {
		for _, iv := range timeline.Clip(tl.Intervals, q.From, end) {
			if iv.ProjectID == q.ProjectID {
				us += iv.To.UnixMicro() - iv.From.UnixMicro()
			}
		}
	}
	return us, true
}

// checkSpan adds the problems of From and To.
func (q Query) checkSpan(ps *page.Params) {
	switch {
	case q.From.IsZero():
		*ps = append(*ps, event.Problem{Member: "/from", Rule: event.RuleRequired, Message: "is required (RFC 3339)"})
	case q.To.IsZero():
	case !q.To.After(q.From):
		*ps = append(*ps, event.Problem{Member: "/to", Rule: event.RuleMinimum, Message: "must be after from"})
	}
	if q.To.IsZero() {
		*ps = append(*ps, event.Problem{Member: "/to", Rule: event.RuleRequired, Message: "is required (RFC 3339)"})
	}
	checkYears(ps, "from", q.From)
	checkYears(ps, "to", q.To)
}

// checkYears refuses a time outside the years 0000 to 9999, which RFC 3339
// writes and every store keeps (event.ParseTime refuses others; a library
// caller can pass any time.Time).
func checkYears(ps *page.Params, name string, t time.Time) {
	if t.IsZero() {
		return
	}
	if _, ok := page.CursorTime(t.UnixMicro()); !ok {
		rule := event.RuleMaximum
		if t.Year() < 0 {
			rule = event.RuleMinimum
		}
		*ps = append(*ps, event.Problem{Member: "/" + name, Rule: rule, Message: "must lie in the years 0000 to 9999 (UTC)"})
	}
}

// atBatch is how many resources [Service.At] reads per round.
const atBatch = 1000

// At lists the resources as their events up to the instant at make them
// (GET /api/v1/resources?at=…): each row is [projection.Fold] of the
// resource's events with a timestamp at or before at, as of the feed's
// head, filtered and paged as f says ([projection.Filter]; AliveAt must be
// zero). Rows are ordered by [projection.Key]. It returns an
// [*event.ValidationError] listing every bad parameter, or the store's
// error wrapped. Its cost grows with the resources the cloud,
// resource_type, platform and project_id filters select (a resource that
// had an event of the platform or project).
func (s *Service) At(ctx context.Context, f projection.Filter, at time.Time) (projection.Page, error) {
	var ps page.Params
	rest := f
	rest.Cursor, rest.Limit = "", 0 // judged below: this listing's cursor is its own
	var ve *event.ValidationError
	if errors.As(rest.Validate(), &ve) {
		ps = append(ps, ve.Problems...)
	}
	limit := ps.Limit(f.Limit)
	var after *projection.Key
	if f.Cursor != "" {
		k, ok := decodeAtCursor(f.Cursor)
		if !ok {
			ps.BadCursor()
		}
		after = &k
	}
	if !f.AliveAt.IsZero() {
		ps = append(ps, event.Problem{Member: "/at", Rule: event.RuleConst, Message: "cannot be given with alive_at"})
	}
	if at.IsZero() {
		ps = append(ps, event.Problem{Member: "/at", Rule: event.RuleRequired, Message: "is required (RFC 3339)"})
	}
	checkYears(&ps, "at", at)
	if err := ps.Err(); err != nil {
		return projection.Page{}, err
	}
	snap, err := s.snapshot(ctx, nil)
	if err != nil {
		return projection.Page{}, err
	}
	// Stored timestamps are whole microseconds: one is at or before at
	// when it is before the microsecond after at's.
	before := at.UTC().Truncate(time.Microsecond).Add(time.Microsecond)
	items := []projection.Resource{}
	for len(items) <= limit {
		// A row's platform and project are its last event's, one the read
		// keeps: selecting by them reads no resource that cannot match.
		q := HistoryQuery{Cloud: f.Cloud, ResourceType: f.ResourceType, Platform: f.Platform, ProjectID: f.ProjectID,
			AsOf: snap.Position, Before: before, After: after, Limit: atBatch}
		n := 0
		err := s.store.Histories(ctx, q, func(h History) error {
			n++
			k := h.Key
			after = &k
			if len(items) > limit {
				return nil
			}
			var start projection.Resource // zero: no checkpoint, FoldFrom is Fold
			if h.Start != nil && h.StartAt.Before(before) {
				start = *h.Start
			} else if len(h.Events) == 0 {
				return nil // known only from a checkpoint after the instant
			}
			r := projection.FoldFrom(start, h.Events)
			if (f.Platform == "" || r.Platform == f.Platform) && (f.ProjectID == "" || r.ProjectID == f.ProjectID) &&
				(f.State == "" || r.State == f.State) && f.Status.Match(r.State) {
				items = append(items, r)
			}
			return nil
		})
		if err != nil {
			return projection.Page{}, fmt.Errorf("usage: read histories: %w", err)
		}
		if n < atBatch {
			break
		}
	}
	out := projection.Page{}
	out.Items, out.NextCursor = page.Paginate(items, limit, projection.Resource.Bytes, func(r projection.Resource) string { return encodeAtCursor(r.Key) })
	return out, nil
}

func encodeAtCursor(k projection.Key) string {
	b, err := json.Marshal([]string{"a1", k.Cloud, k.ResourceType, k.ResourceID})
	if err != nil {
		panic(err) // strings always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeAtCursor(c string) (projection.Key, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return projection.Key{}, false
	}
	var parts []string
	if json.Unmarshal(b, &parts) != nil || len(parts) != 4 || parts[0] != "a1" || !page.CursorText(parts[1:]...) {
		return projection.Key{}, false
	}
	return projection.Key{Cloud: parts[1], ResourceType: parts[2], ResourceID: parts[3]}, true
}
