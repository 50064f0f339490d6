package correlate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tallyhq/tally/event"
)

// ChangeKind is what one change of the change log did to its event: the
// kind of an item of the correlated-event feed (its SSE event name).
type ChangeKind string

// The kinds of change. A replayed create changes nothing and logs nothing.
const (
	// ChangeCreated: a create inserted a new event (step 2, or step 3 or 4
	// recording a new one).
	ChangeCreated ChangeKind = "created"
	// ChangeIncremented: a create counted an occurrence on the open event.
	ChangeIncremented ChangeKind = "incremented"
	// ChangeResolved: a create closed the open event.
	ChangeResolved ChangeKind = "resolved"
	// ChangeStatus: the event was marked read or unread.
	ChangeStatus ChangeKind = "status"
	// ChangeDeleted: the event was soft-deleted.
	ChangeDeleted ChangeKind = "deleted"
)

// ChangeOf is the change kind a create with disposition d logs, and
// false for [Replayed], which logs none.
func ChangeOf(d Disposition) (ChangeKind, bool) {
	switch d {
	case Created:
		return ChangeCreated, true
	case Incremented:
		return ChangeIncremented, true
	case Resolved:
		return ChangeResolved, true
	}
	return "", false
}

// FeedPosition is a place in the change log: (TX, Seq), ordered by TX then
// Seq. On PostgreSQL TX is the writing transaction's id (xid8) and Seq a
// sequence number; in memory TX is 0 and Seq the change's index plus one.
// The zero FeedPosition is before every change.
type FeedPosition struct {
	TX  uint64
	Seq int64
}

// Less reports whether p is before q.
func (p FeedPosition) Less(q FeedPosition) bool {
	return p.TX < q.TX || (p.TX == q.TX && p.Seq < q.Seq)
}

// Change is one entry of the change log: its position, its kind and the
// event as it is after the change (for a delete, the event as deleted).
type Change struct {
	Position FeedPosition
	Kind     ChangeKind
	Event    Event
}

// FeedFilter selects the changes a feed reader sees: the scope of a caller
// (as getEvents scopes it: the caller's own organization and user, or its
// whole organization with AllUsers) and getEvents' filters, applied to the
// event after the change. The zero FeedFilter selects every change of
// every organization (the read of a feed's own tail reader).
type FeedFilter struct {
	// Scope; Organization "" selects every organization.
	Scope          Caller
	Category       []string
	Action         []string
	Severity       []Severity
	Status         []Status
	Resolved       *bool
	CorrelationKey string
	Search         string
}

// Selects reports whether f selects c, as a store's [Store].Feed decides
// in its own query language.
func (f FeedFilter) Selects(c Change) bool {
	e := &c.Event
	if f.Scope.Organization != "" && (e.Organization != f.Scope.Organization || (!f.Scope.AllUsers && e.User != f.Scope.User)) {
		return false
	}
	switch {
	case len(f.Category) > 0 && !slices.Contains(f.Category, e.Category):
	case len(f.Action) > 0 && !slices.Contains(f.Action, e.Action):
	case len(f.Severity) > 0 && !slices.Contains(f.Severity, e.Severity):
	case len(f.Status) > 0 && !slices.Contains(f.Status, e.Status):
	case f.Resolved != nil && *f.Resolved != (e.ResolvedAt != nil):
	case f.CorrelationKey != "" && e.CorrelationKey != f.CorrelationKey:
	case f.Search != "" && !strings.Contains(strings.ToLower(e.Description), strings.ToLower(f.Search)):
	default:
		return true
	}
	return false
}

// MaxFeedScan bounds the changes one [Store].Feed read scans for a
// filter: a read past that many changes the filter does not select stops
// and says how far it got (FeedBatch.Next), so a selective reader never
// makes one read walk the whole log.
const MaxFeedScan = 10000

// FeedRead is one read of the change log ([Store].Feed).
type FeedRead struct {
	// After is where the read starts (exclusive).
	After FeedPosition
	// Limit is the most changes returned (≥ 1); 0 answers only the head:
	// FeedBatch.Next is the last readable position (zero when none is).
	Limit  int
	Filter FeedFilter
}

// FeedBatch is what [Store].Feed answers.
type FeedBatch struct {
	// Changes are the selected changes after FeedRead.After, in log order.
	Changes []Change
	// Next is where the next read starts: the last change returned, or
	// further when the read scanned changes the filter does not select;
	// never before FeedRead.After.
	Next FeedPosition
	// CaughtUp is true when nothing readable lay after Next.
	CaughtUp bool
}

// ErrCursor is returned (wrapped) for a feed cursor or position that is not
// one of this feed and database: tampered, another feed's, or read from
// another database (a position beyond everything this database can have
// written). [Service.Feed] answers it as a problem naming /after.
var ErrCursor = errors.New("correlate: not a cursor of this feed")

// Limits of [Service.Feed].
const (
	DefaultFeedLimit = 100
	MaxFeedLimit     = 1000
	MaxFeedWait      = 30 * time.Second
)

// FeedQuery is one read of the correlated-event feed ([Service.Feed]).
type FeedQuery struct {
	// After is a cursor a previous read returned; "" reads from the
	// beginning, "now" from the current head.
	After string
	// Limit is 1 to [MaxFeedLimit]; 0 means [DefaultFeedLimit].
	Limit int
	// Wait is how long to wait for a change when none is there: 0 to
	// [MaxFeedWait].
	Wait time.Duration
	// The filters of getEvents (see [Query]).
	Category       []string
	Action         []string
	Severity       []Severity
	Status         []Status
	Resolved       *bool
	CorrelationKey string
	Search         string
}

// FeedItem is one item of the feed: its cursor, its kind and the event as
// getEvents returns it, after the change.
type FeedItem struct {
	Position string     `json:"position"`
	Kind     ChangeKind `json:"kind"`
	Event    Event      `json:"event"`
}

// FeedPage is one answer of the feed: {"items":[…],"next_cursor":"…",
// "caught_up":bool}. Items is never nil, NextCursor never "".
type FeedPage struct {
	Items      []FeedItem `json:"items"`
	NextCursor string     `json:"next_cursor"`
	CaughtUp   bool       `json:"caught_up"`
}

// FeedFilter checks q's parameters (members /limit, /wait and getEvents'
// filter members) and returns the filter of caller's reads: its scope and
// q's filters. Errors: an [*event.ValidationError] listing every bad
// parameter; [ErrNoOrganization] or [ErrInvalidCaller].
func (s *Service) FeedFilter(caller Caller, q FeedQuery) (FeedFilter, error) {
	if err := caller.check(); err != nil {
		return FeedFilter{}, err
	}
	var ps problems
	if q.Limit < 0 || q.Limit > MaxFeedLimit {
		ps.add("/limit", event.RuleMaximum, "must be between 1 and %d", MaxFeedLimit)
	}
	if q.Wait < 0 || q.Wait > MaxFeedWait {
		ps.add("/wait", event.RuleMaximum, "must be between 0 and %d seconds", int(MaxFeedWait/time.Second))
	}
	var ve *event.ValidationError
	lq := Query{Category: q.Category, Action: q.Action, Severity: q.Severity, Status: q.Status, CorrelationKey: q.CorrelationKey, Search: q.Search}
	if errors.As(lq.Validate(), &ve) {
		ps = append(ps, ve.Problems...)
	}
	if err := ps.err(); err != nil {
		return FeedFilter{}, err
	}
	return FeedFilter{Scope: caller, Category: q.Category, Action: q.Action, Severity: q.Severity, Status: q.Status,
		Resolved: q.Resolved, CorrelationKey: q.CorrelationKey, Search: q.Search}, nil
}

// Feed returns the changes to the events caller reads (scoped as
// [Service.List] is) that q's filters select, after q.After: one item per
// create that recorded, counted or resolved, status change and delete,
// never one for a replayed create. With q.Wait and nothing to return it
// waits up to q.Wait for a change. Errors: an [*event.ValidationError]
// naming /limit, /wait, a filter, or /after for a cursor that is not one of
// this feed (tampered, the lifecycle feed's, another database's);
// [ErrNoOrganization] or [ErrInvalidCaller]; the store's
// error.
func (s *Service) Feed(ctx context.Context, caller Caller, q FeedQuery) (FeedPage, error) {
	f, err := s.FeedFilter(caller, q)
	if err != nil {
		return FeedPage{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultFeedLimit
	}
	p, err := s.feed.read(ctx, f, q.After, limit, q.Wait)
	if err != nil {
		return FeedPage{}, FeedError(err)
	}
	return p, nil
}

// FeedError is err as [Service.Feed] returns it: an error wrapping
// [ErrCursor] becomes an [*event.ValidationError] naming /after (rule
// format); any other is wrapped.
func FeedError(err error) error {
	if errors.Is(err, ErrCursor) {
		var ps problems
		ps.add("/after", event.RuleFormat, "is not a cursor of this feed (tampered, of another feed, or of another database)")
		return ps.err()
	}
	return fmt.Errorf("correlate: feed: %w", err)
}

// notify tells the feed that a change was committed, and
// Options.Feed.Committed.
func (s *Service) notify() {
	s.feed.hub.Notify()
	if c := s.opts.Feed.Committed; c != nil {
		c()
	}
}

// FeedNotify tells the feed that changes were committed by another replica
// (a post-commit wake-up), so that waiting readers get them now rather
// than at the next poll. Changes made through s wake its readers without
// it.
func (s *Service) FeedNotify() { s.feed.hub.Notify() }
