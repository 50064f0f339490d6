package memstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tallyhq/tally/correlate"
	"github.com/tallyhq/tally/store"
)

var _ correlate.Store = (*Correlate)(nil)

// scopeKey is (organization, user, key): the scope of a correlationKey or
// an idempotencyKey.
type scopeKey struct{ org, user, key string }

type binding struct {
	eventID string
	at      time.Time
}

// correlationData holds the correlated events. Guarded by state.mu.
type correlationData struct {
	events map[string]*correlate.Event // by id
	open   map[scopeKey]string         // the open event of a correlationKey, by id
	keys   map[scopeKey]binding        // idempotency keys
	// changes is the change log in commit order: the change at index i is at
	// Position{TX: 0, Seq: i+1}.
	changes []correlate.Change
}

// logChange appends a change of kind holding a copy of e.
func (d *correlationData) logChange(kind correlate.ChangeKind, e *correlate.Event) {
	d.changes = append(d.changes, correlate.Change{
		Position: correlate.FeedPosition{Seq: int64(len(d.changes) + 1)},
		Kind:     kind, Event: e.Clone(),
	})
}

func (d *correlationData) init() {
	d.events = make(map[string]*correlate.Event)
	d.open = make(map[scopeKey]string)
	d.keys = make(map[scopeKey]binding)
}

// Create implements [correlate.Store]: the whole create runs under the
// store's lock, so it is atomic and isolated like the PostgreSQL
// transaction, and nothing changes when it fails.
func (s *Correlate) Create(ctx context.Context, c correlate.Create) (correlate.Event, correlate.Disposition, error) {
	if err := ctx.Err(); err != nil {
		return correlate.Event{}, "", fmt.Errorf("memstore: create event: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.correlation
	ik := scopeKey{c.Caller.Organization, c.Caller.User, c.IdempotencyKey}
	if c.IdempotencyKey != "" {
		if b, ok := d.keys[ik]; ok && !b.at.Before(c.KeyNotBefore) {
			return d.events[b.eventID].Clone(), correlate.Replayed, nil
		}
	}
	var (
		e    *correlate.Event
		disp = correlate.Created
	)
	ck := scopeKey{c.Caller.Organization, c.Caller.User, c.Event.CorrelationKey}
	if c.Step == correlate.StepOccurrence || c.Step == correlate.StepResolution {
		if id, ok := d.open[ck]; ok {
			e = d.events[id]
		}
	}
	if e == nil && c.Step == correlate.StepResolution && c.InsertRefused != nil {
		return correlate.Event{}, "", c.InsertRefused // nothing to close, and the insert contradicts itself
	}
	switch {
	case e == nil:
		ev := c.Event.Clone()
		e = &ev
		d.events[e.ID] = e
		if c.Step == correlate.StepOccurrence {
			d.open[ck] = e.ID
		}
	case c.Step == correlate.StepOccurrence:
		disp = correlate.Incremented
		n := *e.OccurrenceCount
		if n > math.MaxInt64-c.Count {
			n = math.MaxInt64
		} else {
			n += c.Count
		}
		e.OccurrenceCount = &n
		e.LastSeenAt = later(e.LastSeenAt, c.LastSeenAt)
		e.UpdatedAt = maxTime(e.UpdatedAt, c.Now)
	default:
		disp = correlate.Resolved
		r := c.ResolvedAt
		e.ResolvedAt = &r
		if c.Severity != "" {
			e.Severity = c.Severity
		}
		if c.Description != nil {
			e.Description = *c.Description
		}
		e.LastSeenAt = later(e.LastSeenAt, c.LastSeenAt)
		e.UpdatedAt = maxTime(e.UpdatedAt, c.Now)
		delete(d.open, ck)
	}
	if c.IdempotencyKey != "" {
		d.keys[ik] = binding{eventID: e.ID, at: c.Now}
	}
	kind, _ := correlate.ChangeOf(disp)
	d.logChange(kind, e)
	return e.Clone(), disp, nil
}

func later(t *time.Time, u time.Time) *time.Time {
	if t != nil && t.After(u) {
		return t
	}
	return &u
}

func maxTime(t, u time.Time) time.Time {
	if t.After(u) {
		return t
	}
	return u
}

// visible returns the event with id in scope, or nil when there is none or
// it is deleted.
func (d *correlationData) visible(scope correlate.Caller, id string) *correlate.Event {
	e, ok := d.events[id]
	if !ok || e.Organization != scope.Organization || e.User != scope.User || e.DeletedAt != nil {
		return nil
	}
	return e
}

// Get implements [correlate.Store].
func (s *Correlate) Get(ctx context.Context, scope correlate.Caller, id string) (correlate.Event, error) {
	if err := ctx.Err(); err != nil {
		return correlate.Event{}, fmt.Errorf("memstore: get event: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.correlation.visible(scope, id)
	if e == nil {
		return correlate.Event{}, fmt.Errorf("memstore: get event %s: %w", id, store.ErrNotFound)
	}
	return e.Clone(), nil
}

// List implements [correlate.Store].
func (s *Correlate) List(ctx context.Context, scope correlate.Caller, q correlate.Query) (correlate.Listing, error) {
	if err := ctx.Err(); err != nil {
		return correlate.Listing{}, fmt.Errorf("memstore: list events: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	match, l := s.correlation.matching(scope, q)
	sortEvents(match, q)
	l.Total = int64(len(match))
	l.Events = listPage(match, q)
	return l, nil
}

// matching returns the events of scope that q selects, unsorted, and the
// listing's counts: Read (which ignores the status filter, see
// correlate.Listing) and BySeverity (of the events returned).
func (d *correlationData) matching(scope correlate.Caller, q correlate.Query) ([]*correlate.Event, correlate.Listing) {
	var (
		match []*correlate.Event
		l     correlate.Listing
	)
	bySeverity := map[correlate.Severity]int64{}
	search := strings.ToLower(q.Search)
	for _, e := range d.events {
		if !listable(e, scope) || !selects(q, search, e) {
			continue
		}
		if e.Status == correlate.StatusRead {
			l.Read++
		}
		if len(q.Status) == 0 || slices.Contains(q.Status, e.Status) {
			match = append(match, e)
			bySeverity[e.Severity]++
		}
	}
	for _, sv := range correlate.Severities() {
		if n := bySeverity[sv]; n > 0 {
			l.BySeverity = append(l.BySeverity, correlate.SeverityCount{Severity: sv, Count: n})
		}
	}
	return match, l
}

// listable reports whether a listing for scope may show e: of its
// organization, of its user unless it lists all users, not deleted.
func listable(e *correlate.Event, scope correlate.Caller) bool {
	return e.Organization == scope.Organization && (e.User == scope.User || scope.AllUsers) && e.DeletedAt == nil
}

// selects reports whether e passes every filter of q but the status filter;
// search is q.Search in lower case, matched anywhere in the description.
func selects(q correlate.Query, search string, e *correlate.Event) bool {
	switch {
	case len(q.Category) > 0 && !slices.Contains(q.Category, e.Category):
	case len(q.Action) > 0 && !slices.Contains(q.Action, e.Action):
	case len(q.Severity) > 0 && !slices.Contains(q.Severity, e.Severity):
	case q.Resolved != nil && *q.Resolved != (e.ResolvedAt != nil):
	case q.CorrelationKey != "" && e.CorrelationKey != q.CorrelationKey:
	case search != "" && !strings.Contains(strings.ToLower(e.Description), search):
	default:
		return true
	}
	return false
}

// sortEvents sorts events by q's sort field in q's order, ties broken by
// createdAt, then id.
func sortEvents(events []*correlate.Event, q correlate.Query) {
	key := sortKey(q.Sort)
	slices.SortFunc(events, func(a, b *correlate.Event) int {
		c := cmp.Or(key(a, b), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
		if q.Order == correlate.OrderDesc {
			return -c
		}
		return c
	})
}

// listPage returns copies of q's page of the sorted events, cut after the event
// that brings their size (correlate.EventBytes) past q.MaxBytes, when set.
func listPage(sorted []*correlate.Event, q correlate.Query) []correlate.Event {
	start := min(q.Page*q.PageSize, len(sorted))
	end := min(start+q.PageSize, len(sorted))
	out := make([]correlate.Event, 0, end-start)
	total := 0
	for _, e := range sorted[start:end] {
		out = append(out, e.Clone())
		if total += correlate.EventBytes(*e); q.MaxBytes > 0 && total > q.MaxBytes {
			break
		}
	}
	return out
}

// sortKey compares two events by the sort field f; text byte by byte, as
// PostgreSQL's "C" collation does.
func sortKey(f correlate.SortField) func(a, b *correlate.Event) int {
	text := func(get func(e *correlate.Event) string) func(a, b *correlate.Event) int {
		return func(a, b *correlate.Event) int { return strings.Compare(get(a), get(b)) }
	}
	switch f {
	case correlate.SortUpdatedAt:
		return func(a, b *correlate.Event) int { return a.UpdatedAt.Compare(b.UpdatedAt) }
	case correlate.SortOwner:
		return text(func(e *correlate.Event) string { return e.Owner })
	case correlate.SortSystemID:
		return text(func(e *correlate.Event) string { return e.SystemID })
	case correlate.SortCategory:
		return text(func(e *correlate.Event) string { return e.Category })
	case correlate.SortAction:
		return text(func(e *correlate.Event) string { return e.Action })
	case correlate.SortSeverity:
		return text(func(e *correlate.Event) string { return string(e.Severity) })
	case correlate.SortStatus:
		return text(func(e *correlate.Event) string { return string(e.Status) })
	case correlate.SortDescription:
		return text(func(e *correlate.Event) string { return e.Description })
	default: // createdAt: the tie-break alone
		return func(a, b *correlate.Event) int { return 0 }
	}
}

// SetStatus implements [correlate.Store].
func (s *Correlate) SetStatus(ctx context.Context, scope correlate.Caller, id string, status correlate.Status, at time.Time) (correlate.Event, error) {
	if err := ctx.Err(); err != nil {
		return correlate.Event{}, fmt.Errorf("memstore: set event status: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.correlation.visible(scope, id)
	if e == nil {
		return correlate.Event{}, fmt.Errorf("memstore: set event status %s: %w", id, store.ErrNotFound)
	}
	e.Status = status
	e.UpdatedAt = maxTime(e.UpdatedAt, at)
	s.correlation.logChange(correlate.ChangeStatus, e)
	return e.Clone(), nil
}

// Delete implements [correlate.Store].
func (s *Correlate) Delete(ctx context.Context, scope correlate.Caller, id string, at time.Time) (correlate.Event, error) {
	if err := ctx.Err(); err != nil {
		return correlate.Event{}, fmt.Errorf("memstore: delete event: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.correlation
	e := d.visible(scope, id)
	if e == nil {
		return correlate.Event{}, fmt.Errorf("memstore: delete event %s: %w", id, store.ErrNotFound)
	}
	e.DeletedAt = &at
	e.UpdatedAt = maxTime(e.UpdatedAt, at)
	ck := scopeKey{e.Organization, e.User, e.CorrelationKey}
	if d.open[ck] == e.ID {
		delete(d.open, ck)
	}
	d.logChange(correlate.ChangeDeleted, e)
	return e.Clone(), nil
}

// SetStatuses implements [correlate.Store].
func (s *Correlate) SetStatuses(ctx context.Context, scope correlate.Caller, ids []string, status correlate.Status, at time.Time) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: set event statuses: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var done []string
	for _, id := range ids {
		if e := s.correlation.visible(scope, id); e != nil {
			e.Status = status
			e.UpdatedAt = maxTime(e.UpdatedAt, at)
			s.correlation.logChange(correlate.ChangeStatus, e)
			done = append(done, id)
		}
	}
	return done, nil
}

// DeleteMany implements [correlate.Store].
func (s *Correlate) DeleteMany(ctx context.Context, scope correlate.Caller, ids []string, at time.Time) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: delete events: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.correlation
	var done []string
	for _, id := range ids {
		e := d.visible(scope, id)
		if e == nil {
			continue
		}
		e.DeletedAt = &at
		e.UpdatedAt = maxTime(e.UpdatedAt, at)
		ck := scopeKey{e.Organization, e.User, e.CorrelationKey}
		if d.open[ck] == e.ID {
			delete(d.open, ck)
		}
		d.logChange(correlate.ChangeDeleted, e)
		done = append(done, id)
	}
	return done, nil
}

// Types implements [correlate.Store].
func (s *Correlate) Types(ctx context.Context, scope correlate.Caller) ([]correlate.EventType, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: event types: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[correlate.EventType]bool{}
	for _, e := range s.correlation.events {
		if e.Organization != scope.Organization || (e.User != scope.User && !scope.AllUsers) || e.DeletedAt != nil {
			continue
		}
		seen[correlate.EventType{Category: e.Category, Action: e.Action}] = true
	}
	out := slices.Collect(maps.Keys(seen))
	slices.SortFunc(out, func(a, b correlate.EventType) int {
		return cmp.Or(strings.Compare(a.Category, b.Category), strings.Compare(a.Action, b.Action))
	})
	return out, nil
}

// Counts implements [correlate.Store].
func (s *Correlate) Counts(ctx context.Context, scope correlate.Caller, q correlate.Query, by correlate.CountKey) ([]correlate.Count, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: count events: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	match, _ := s.correlation.matching(scope, q)
	groups := map[correlate.Count]int64{}
	for _, e := range match {
		k := correlate.Count{Key: e.User, Severity: e.Severity, Status: e.Status}
		if by == correlate.CountByCategory {
			k.Key = e.Category
		}
		groups[k]++
	}
	out := make([]correlate.Count, 0, len(groups))
	for k, n := range groups {
		k.N = n
		out = append(out, k)
	}
	correlate.SortCounts(out)
	return out, nil
}

// PurgeIdempotencyKeys implements [correlate.Store].
func (s *Correlate) PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: delete idempotency keys: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, b := range s.correlation.keys {
		if b.at.Before(before) {
			delete(s.correlation.keys, k)
			n++
		}
	}
	return n, nil
}

// Feed implements [correlate.Store]. A position past the end of the log
// (or with a TX, which only PostgreSQL writes) is another database's.
func (s *Correlate) Feed(ctx context.Context, q correlate.FeedRead) (correlate.FeedBatch, error) {
	if err := ctx.Err(); err != nil {
		return correlate.FeedBatch{}, fmt.Errorf("memstore: read feed: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.correlation.changes
	if q.After.TX != 0 || q.After.Seq < 0 || q.After.Seq > int64(len(log)) {
		return correlate.FeedBatch{}, fmt.Errorf("memstore: read feed after (%d, %d): %w", q.After.TX, q.After.Seq, correlate.ErrCursor)
	}
	if q.Limit <= 0 {
		var head correlate.FeedPosition
		if len(log) > 0 {
			head = log[len(log)-1].Position
		}
		return correlate.FeedBatch{Next: head, CaughtUp: true}, nil
	}
	b := correlate.FeedBatch{Next: q.After}
	scanned := 0
	for i := int(q.After.Seq); i < len(log); i++ {
		c := log[i]
		b.Next = c.Position
		if q.Filter.Selects(c) {
			c.Event = c.Event.Clone()
			b.Changes = append(b.Changes, c)
			if len(b.Changes) == q.Limit {
				b.CaughtUp = i == len(log)-1
				return b, nil
			}
		}
		if scanned++; scanned == correlate.MaxFeedScan {
			b.CaughtUp = i == len(log)-1
			return b, nil
		}
	}
	b.CaughtUp = true
	return b, nil
}
