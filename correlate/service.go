package correlate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tallyhq/tally/event"
	"github.com/tallyhq/tally/store"
)

// Options configures a [Service]. The zero value is valid.
type Options struct {
	// Now is the clock that gives the time of receipt. Nil means time.Now.
	// Its readings are taken in UTC and truncated to microseconds.
	Now func() time.Time
	// LegacyCreate200 answers a legacy create (one carrying neither
	// correlationKey nor idempotencyKey) 200 instead of 201, as
	// event-correlation.md (`Event-Disposition`) allows for released
	// Meshery Servers. Off by default. See [Service.StatusCode].
	LegacyCreate200 bool
	// IdempotencyRetention is how long a bound idempotencyKey replays. Zero
	// (the default) keeps every key forever. When set, a key bound longer
	// ago than this no longer replays (a create with it has its effect and
	// binds it anew), and [Service.PurgeIdempotencyKeys] forgets such keys.
	IdempotencyRetention time.Duration
	// Observer receives the counters of correlation, to be backed by a
	// metrics library (tallyd counts them in
	// tally_correlate_dispositions_total); nil counts nothing.
	Observer Observer
	// Feed tunes the change feed ([Service.Feed]).
	Feed FeedOptions
}

// FeedOptions tune the correlated-event feed of a [Service].
type FeedOptions struct {
	// Poll is how often the feed looks for changes committed by other
	// replicas when nothing woke it (default 500ms).
	Poll time.Duration
	// Committed, when not nil, is called after each call that changed an
	// event, once its commit has returned: the place for a post-commit
	// wake-up of the other replicas (pgstore.DB.NotifyFeed). It must not
	// block.
	Committed func()
}

// Observer receives the counters of correlation. [Service.Create] calls it
// once per successful create, after the store has committed it, so a
// program that embeds the library and calls Create counts as the HTTP
// server does. Implementations must be safe for concurrent use and should
// not block.
type Observer interface {
	// Disposition counts one create that ended with d (a refused or failed
	// create is not counted).
	Disposition(d Disposition)
}

type nopObserver struct{}

func (nopObserver) Disposition(Disposition) {}

// Service is the createEvent state machine of event-correlation.md and the
// getEvents reads and writes around it, over a [Store]. It is safe for
// concurrent use; several Services may share one store (or one database),
// as the store enforces every invariant.
type Service struct {
	store Store
	opts  Options
	feed  *feedHub
}

// New returns a Service over st. Errors (joined): st is nil, or a negative
// IdempotencyRetention.
func New(st Store, opts Options) (*Service, error) {
	var errs []error
	if st == nil {
		errs = append(errs, errors.New("correlate: store is nil"))
	}
	if opts.IdempotencyRetention < 0 {
		errs = append(errs, errors.New("correlate: IdempotencyRetention is negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return &Service{store: st, opts: opts, feed: newFeedHub(st, opts.Feed)}, nil
}

func (s *Service) now() time.Time { return event.Normalize(s.opts.Now()) }

// StatusCode is the HTTP status createEvent answers for a create of p that
// ended with d: 201 for [Created] and 200 for the rest, except that with
// Options.LegacyCreate200 a created legacy create (neither correlationKey
// nor idempotencyKey) answers 200 (event-correlation.md, step 2 and
// `Event-Disposition`).
func (s *Service) StatusCode(p Payload, d Disposition) int {
	legacy := p.CorrelationKey == "" && p.IdempotencyKey == ""
	return d.statusCode(s.opts.LegacyCreate200 && legacy)
}

// Create records one create of caller, in the order of event-correlation.md
// (`createEvent` semantics):
//
//  1. Replay: an idempotencyKey the caller already bound returns the bound
//     event as it is now, [Replayed]; nothing changes.
//  2. No correlationKey, or a caller with no user: a new event, the
//     correlation fields exactly as sent, [Created].
//  3. A correlationKey without resolvedAt: count the occurrence on the open
//     event ([Incremented]) or open the condition ([Created]) with the
//     opening defaults.
//  4. A correlationKey with resolvedAt: close the open event ([Resolved]) or
//     record an already-resolved event ([Created]).
//  5. Binding: the idempotencyKey is bound to that event, atomically with
//     the effect.
//
// A caller with no User never correlates: every create it makes is
// recorded as sent (step 2), since correlation is scoped to (organization,
// user) and a call that identifies no user has none to scope to. Give every
// producer that needs correlation a user.
//
// Times that contradict each other (docs/decisions.md: "an already-resolved
// insert whose resolvedAt is before its firstSeenAt: 400 naming the later
// member. A resolution of an open event with an earlier resolvedAt still
// closes it (step 4)"): a payload with resolvedAt before firstSeenAt is
// refused, naming /resolvedAt, whenever it would be inserted, at step 2
// always and at step 4 only when there is no open event to close (the
// store decides, [Create].InsertRefused); closing an open event ignores the
// payload's firstSeenAt, so it proceeds.
//
// Errors: an [*event.ValidationError] (errors.Is [event.ErrInvalid]) listing every
// problem of p, [ErrNoOrganization] or [ErrInvalidCaller], or the store's error. A refused create
// records nothing and binds no key. Times in p are taken in UTC, truncated
// to microseconds ([event.Normalize]).
func (s *Service) Create(ctx context.Context, caller Caller, p Payload) (Event, Disposition, error) {
	if err := caller.check(); err != nil {
		return Event{}, "", err
	}
	if err := p.Validate(); err != nil {
		return Event{}, "", err
	}
	c := s.plan(caller, p)
	if r, f := c.Event.ResolvedAt, c.Event.FirstSeenAt; r != nil && f != nil && r.Before(*f) {
		var ps problems
		ps.add("/resolvedAt", event.RuleMinimum, "must not be before firstSeenAt (%s) on an event recorded already resolved", f.Format(time.RFC3339Nano))
		if c.Step == StepRecord {
			return Event{}, "", ps.err()
		}
		c.InsertRefused = ps.err() // StepResolution: refused only if nothing is closed
	}
	e, d, err := s.store.Create(ctx, c)
	if err != nil {
		var ve *event.ValidationError
		if errors.As(err, &ve) {
			return Event{}, "", err
		}
		return Event{}, "", fmt.Errorf("correlate: create: %w", err)
	}
	s.opts.Observer.Disposition(d)
	if d != Replayed {
		s.notify()
	}
	return e, d, nil
}

func truncated(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := event.Normalize(*t)
	return &u
}

func ptr[T any](v T) *T { return &v }

// plan applies the rules of steps 2 to 5 that do not depend on the stored
// state.
func (s *Service) plan(caller Caller, p Payload) Create {
	now := s.now()
	first, last, resolved := truncated(p.FirstSeenAt), truncated(p.LastSeenAt), truncated(p.ResolvedAt)
	e := Event{
		ID:           uuid.Must(uuid.NewV7()).String(),
		Organization: caller.Organization,
		User:         caller.User,
		Owner:        p.Owner,
		SystemID:     p.SystemID,
		ActedUpon:    p.ActedUpon,
		OperationID:  p.OperationID,
		Category:     p.Category,
		Action:       p.Action,
		Severity:     p.Severity,
		Status:       StatusUnread,
		Metadata:     cloneValue(p.Metadata),
		CreatedAt:    now,
		UpdatedAt:    now,

		CorrelationKey: p.CorrelationKey,
		Source:         p.Source,
		Type:           p.Type,
		Specversion:    p.Specversion,
		TraceID:        p.TraceID,
		ParentID:       p.ParentID,
		Extra:          cloneExtra(p.Extra),
	}
	if e.Severity == "" {
		e.Severity = SeverityInformational // docs/decisions.md: severity when omitted
	}
	if p.Description != nil {
		e.Description = *p.Description
	}
	c := Create{Caller: caller, IdempotencyKey: p.IdempotencyKey, Now: now}
	if s.opts.IdempotencyRetention > 0 {
		c.KeyNotBefore = now.Add(-s.opts.IdempotencyRetention)
	}
	count := int64(1)
	if p.OccurrenceCount != nil {
		count = *p.OccurrenceCount
	}
	switch {
	case p.CorrelationKey == "" || caller.User == "":
		// Step 2: "The correlation fields are stored exactly as sent: no
		// defaults are applied and no open event is matched."
		c.Step = StepRecord
		if p.OccurrenceCount != nil {
			e.OccurrenceCount = ptr(*p.OccurrenceCount)
		}
		e.FirstSeenAt, e.LastSeenAt, e.ResolvedAt = first, last, resolved
	case resolved == nil:
		// Step 3, opening defaults: "firstSeenAt is the payload's
		// firstSeenAt, else its lastSeenAt, else the time of receipt.
		// lastSeenAt is the payload's lastSeenAt, else firstSeenAt."
		c.Step = StepOccurrence
		e.OccurrenceCount = ptr(count)
		switch {
		case first != nil:
			e.FirstSeenAt = first
		case last != nil:
			e.FirstSeenAt = ptr(*last)
		default:
			e.FirstSeenAt = ptr(now)
		}
		if last != nil {
			e.LastSeenAt = last
		} else {
			e.LastSeenAt = ptr(*e.FirstSeenAt)
		}
		c.Count = count
		c.LastSeenAt = now
		if last != nil {
			c.LastSeenAt = *last
		}
	default:
		// Step 4: closing, or "recorded as a new event that is already
		// resolved (201, created), using the opening defaults".
		c.Step = StepResolution
		e.OccurrenceCount = ptr(count)
		e.ResolvedAt = resolved
		e.FirstSeenAt, e.LastSeenAt = first, last
		if first == nil {
			// An already-resolved insert without firstSeenAt: the opening
			// default is the earliest time given (lastSeenAt or
			// resolvedAt), so firstSeenAt never lies after lastSeenAt.
			e.FirstSeenAt = ptr(*resolved)
			if last != nil && last.Before(*resolved) {
				e.FirstSeenAt = ptr(*last)
			}
		}
		if last == nil {
			e.LastSeenAt = ptr(*resolved)
		}
		c.ResolvedAt = *resolved
		c.Severity = p.Severity
		if p.Description != nil {
			c.Description = ptr(*p.Description)
		}
		c.LastSeenAt = now
		if last != nil {
			c.LastSeenAt = *last
		}
	}
	c.Event = e
	return c
}

// parseID returns the canonical form of a UUID id, or an error wrapping
// store.ErrNotFound: an id that is not a UUID names no event.
func parseID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("correlate: event %q: %w", id, store.ErrNotFound)
	}
	return u.String(), nil
}

// Get returns the event with id in the caller's scope. Errors: wrapping
// store.ErrNotFound when id is not a UUID, does not exist, is deleted or
// belongs to another scope; [ErrNoOrganization] or [ErrInvalidCaller]; the store's error.
func (s *Service) Get(ctx context.Context, caller Caller, id string) (Event, error) {
	if err := caller.check(); err != nil {
		return Event{}, err
	}
	id, err := parseID(id)
	if err != nil {
		return Event{}, err
	}
	e, err := s.store.Get(ctx, caller, id)
	if err != nil {
		return Event{}, fmt.Errorf("correlate: get event: %w", err)
	}
	return e, nil
}

// List returns one page of getEvents, never listing deleted events; its
// data holds at most PageSize events and [MaxPageBytes] of them (at least
// one). Who
// sees what (docs/decisions.md, Who reads correlated events): a caller lists the
// events recorded by its own (Organization, User), so a caller with no user
// lists those recorded with no user in its organization; a caller with
// AllUsers set (a reader of the organization) lists every event of its
// organization, whoever recorded it. No caller ever lists another
// organization's events. Errors: an [*event.ValidationError] listing every
// bad parameter (members are pointers to the parameters as getEvents names
// them: /page, /pageSize, /order, /severity, /status, /category, /action,
// /correlationKey, /search, /sort; page must be 0 to [MaxPage]; text must be valid
// UTF-8 without NUL); [ErrNoOrganization] or [ErrInvalidCaller]; the store's error.
func (s *Service) List(ctx context.Context, caller Caller, q Query) (Page, error) {
	if err := caller.check(); err != nil {
		return Page{}, err
	}
	if err := q.Validate(); err != nil {
		return Page{}, err
	}
	if q.PageSize == 0 {
		q.PageSize = DefaultPageSize
	}
	if q.Order == "" {
		q.Order = OrderDesc
	}
	if q.Sort == "" {
		q.Sort = SortCreatedAt
	}
	q.MaxBytes = MaxPageBytes
	l, err := s.store.List(ctx, caller, q)
	if err != nil {
		return Page{}, fmt.Errorf("correlate: list events: %w", err)
	}
	l.Events = l.Events[:cutPage(l.Events)]
	if l.Events == nil {
		l.Events = []Event{}
	}
	if l.BySeverity == nil {
		l.BySeverity = []SeverityCount{}
	}
	return Page{Page: q.Page, PageSize: q.PageSize, TotalCount: l.Total, ReadCount: l.Read,
		CountBySeverityLevel: l.BySeverity, Data: l.Events}, nil
}

// Validate returns an [*event.ValidationError] listing every bad parameter
// of q (see [Service.List], which calls it), or nil. A zero PageSize and an
// empty Order are valid: they mean the defaults. An HTTP adapter calls it
// to list these problems beside its own.
func (q Query) Validate() error {
	var ps problems
	switch {
	case q.Page < 0:
		ps.add("/page", event.RuleMinimum, "must be between 0 and %d", MaxPage)
	case q.Page > MaxPage:
		ps.add("/page", event.RuleMaximum, "must be between 0 and %d", MaxPage)
	}
	switch {
	case q.PageSize < 0:
		ps.add("/pageSize", event.RuleMinimum, "must be between 1 and %d", MaxPageSize)
	case q.PageSize > MaxPageSize:
		ps.add("/pageSize", event.RuleMaximum, "must be between 1 and %d", MaxPageSize)
	}
	if q.Order != "" && q.Order != OrderAsc && q.Order != OrderDesc {
		ps.add("/order", event.RuleEnum, `must be "asc" or "desc"`)
	}
	if q.Sort != "" && !slices.Contains(SortFields(), q.Sort) {
		ps.add("/sort", event.RuleEnum, "%q is not a field getEvents sorts by (%s)", clip(string(q.Sort)), sortFieldList())
	}
	badValues(&ps, "severity", q.Severity)
	badValues(&ps, "status", q.Status)
	text := func(name string, vs ...string) {
		for _, v := range vs {
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				ps.add("/"+name, event.RuleUTF8, "must be valid UTF-8 without NUL")
				return
			}
		}
	}
	text("category", q.Category...)
	text("action", q.Action...)
	text("correlationKey", q.CorrelationKey)
	text("search", q.Search)
	return ps.err()
}

// badValues adds one problem for the values of the list parameter name
// that are not valid, whatever their number: the first is quoted (clipped
// to 40 bytes) and the rest counted, so 10,000 bad values cost one short
// problem, not an answer larger than the query.
func badValues[T interface {
	~string
	Valid() bool
}](ps *problems, name string, vs []T) {
	var first string
	bad := 0
	for _, v := range vs {
		if !v.Valid() {
			if bad == 0 {
				first = string(v)
			}
			bad++
		}
	}
	switch {
	case bad == 1:
		ps.add("/"+name, event.RuleEnum, "%q is not a %s", clip(first), name)
	case bad > 1:
		ps.add("/"+name, event.RuleEnum, "%q is not a %s, nor are %d more of its values", clip(first), name, bad-1)
	}
}

// clip shortens s for a problem message, so a refused long value is not
// echoed whole: at most 40 bytes, cut on a UTF-8 boundary, then "…".
func clip(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// SetStatus marks the event with id read or unread, as Meshery's events
// API does, and returns it. Errors: an [*event.ValidationError] for a status not
// in [Statuses] (member "/status"), then as [Service.Get].
func (s *Service) SetStatus(ctx context.Context, caller Caller, id string, status Status) (Event, error) {
	if err := caller.check(); err != nil {
		return Event{}, err
	}
	if !status.Valid() {
		var ps problems
		ps.add("/status", event.RuleEnum, `must be "read" or "unread"`)
		return Event{}, ps.err()
	}
	id, err := parseID(id)
	if err != nil {
		return Event{}, err
	}
	e, err := s.store.SetStatus(ctx, caller, id, status, s.now())
	if err != nil {
		return Event{}, fmt.Errorf("correlate: set event status: %w", err)
	}
	s.notify()
	return e, nil
}

// Delete soft-deletes the event with id: it gets DeletedAt, is no longer
// listed or read, and no longer counts as the open event of its
// correlationKey (the next occurrence opens a new event). Errors as
// [Service.Get]; deleting a deleted event is not found.
func (s *Service) Delete(ctx context.Context, caller Caller, id string) (Event, error) {
	if err := caller.check(); err != nil {
		return Event{}, err
	}
	id, err := parseID(id)
	if err != nil {
		return Event{}, err
	}
	e, err := s.store.Delete(ctx, caller, id, s.now())
	if err != nil {
		return Event{}, fmt.Errorf("correlate: delete event: %w", err)
	}
	s.notify()
	return e, nil
}

// PurgeIdempotencyKeys forgets the idempotency keys bound longer ago than
// Options.IdempotencyRetention and returns how many. With no retention (the
// default) it forgets nothing and returns 0. Call it periodically.
func (s *Service) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	if s.opts.IdempotencyRetention <= 0 {
		return 0, nil
	}
	n, err := s.store.PurgeIdempotencyKeys(ctx, s.now().Add(-s.opts.IdempotencyRetention))
	if err != nil {
		return 0, fmt.Errorf("correlate: purge idempotency keys: %w", err)
	}
	return n, nil
}

func sortFieldList() string {
	var b strings.Builder
	for i, f := range SortFields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(f))
	}
	return b.String()
}

// bulkIDs checks ids for a bulk operation: 1 to [MaxBulkIDs] of them, each
// a UUID (member /ids/<index>, rule format). It returns them in canonical
// form, repeats dropped.
func bulkIDs(ps *problems, ids []string) []string {
	switch {
	case len(ids) == 0:
		ps.add("/ids", event.RuleRequired, "must list at least one id")
	case len(ids) > MaxBulkIDs:
		ps.add("/ids", event.RuleMaximum, "must list at most %d ids", MaxBulkIDs)
		return nil
	}
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			ps.add(fmt.Sprintf("/ids/%d", i), event.RuleFormat, "must be a UUID")
			continue
		}
		if c := u.String(); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// SetStatuses marks each event of ids read or unread, as @meshery/schemas'
// bulkUpdateEventStatus does, and returns the ids it changed (canonical, in
// the order given, repeats once). An id of no event in the caller's scope
// (another user's, deleted, unknown) is left out of the answer, not an
// error. Errors: an [*event.ValidationError] naming /status (not in
// [Statuses]), /ids (none, or more than [MaxBulkIDs]) or /ids/<index> (not
// a UUID); [ErrNoOrganization]; the store's error.
func (s *Service) SetStatuses(ctx context.Context, caller Caller, ids []string, status Status) ([]string, error) {
	if caller.Organization == "" {
		return nil, ErrNoOrganization
	}
	var ps problems
	ids = bulkIDs(&ps, ids)
	if !status.Valid() {
		ps.add("/status", event.RuleEnum, `must be "read" or "unread"`)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	done, err := s.store.SetStatuses(ctx, caller, ids, status, s.now())
	if err != nil {
		return nil, fmt.Errorf("correlate: set event statuses: %w", err)
	}
	if len(done) > 0 {
		s.notify()
	}
	return done, nil
}

// DeleteMany soft-deletes each event of ids, as [Service.Delete] does one
// and @meshery/schemas' bulkDeleteEvents many, and returns the ids it
// deleted, as [Service.SetStatuses] returns them. Errors as SetStatuses,
// without /status.
func (s *Service) DeleteMany(ctx context.Context, caller Caller, ids []string) ([]string, error) {
	if caller.Organization == "" {
		return nil, ErrNoOrganization
	}
	var ps problems
	ids = bulkIDs(&ps, ids)
	if err := ps.err(); err != nil {
		return nil, err
	}
	done, err := s.store.DeleteMany(ctx, caller, ids, s.now())
	if err != nil {
		return nil, fmt.Errorf("correlate: delete events: %w", err)
	}
	if len(done) > 0 {
		s.notify()
	}
	return done, nil
}

// Types returns one page of the distinct (category, action) pairs of the
// events the caller lists (as [Service.List] scopes them; deleted events
// not counted), ordered by category then action, byte by byte
// (@meshery/schemas getEventTypes). page is 0-based; pageSize 0 means
// [MaxPageSize]. Errors: an [*event.ValidationError] naming /page or
// /pageSize (the limits of [Query]); [ErrNoOrganization]; the store's
// error.
func (s *Service) Types(ctx context.Context, caller Caller, page, pageSize int) ([]EventType, error) {
	if caller.Organization == "" {
		return nil, ErrNoOrganization
	}
	if err := (Query{Page: page, PageSize: pageSize}).Validate(); err != nil {
		return nil, err
	}
	if pageSize == 0 {
		pageSize = MaxPageSize
	}
	all, err := s.store.Types(ctx, caller)
	if err != nil {
		return nil, fmt.Errorf("correlate: event types: %w", err)
	}
	start := min(page*pageSize, len(all))
	end := min(start+pageSize, len(all))
	return append([]EventType{}, all[start:end]...), nil
}
